// Ollama responses: times as RFC 3339, the last object's counts and durations, calls as
// message.tool_calls, and the NDJSON stream, whose lines rebuild the non-streamed answer
// whatever the deltas' cuts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/ollama_response.h"
#include "server/stream_formats.h"

namespace tangram::server {
namespace {

using nlohmann::json;

RequestResult ended(FinishReason finish, std::string text) {
  RequestResult r;
  r.finish = finish;
  r.text = std::move(text);
  r.timing.total_seconds = 0.5;
  r.timing.prefill_seconds = 0.125;
  r.timing.decode_seconds = 0.25;
  return r;
}

std::vector<json> lines_of(const std::string& ndjson) {
  std::vector<json> out;
  size_t at = 0;
  while (at < ndjson.size()) {
    const size_t nl = ndjson.find('\n', at);
    EXPECT_NE(nl, std::string::npos) << "a line without its newline";
    if (nl == std::string::npos) break;
    EXPECT_GT(nl, at) << "an empty line (Ollama's clients warn on it)";
    out.push_back(json::parse(ndjson.substr(at, nl - at)));
    at = nl + 1;
  }
  return out;
}

TEST(OllamaResponse, Rfc3339InUtcWithNanoseconds) {
  EXPECT_EQ(rfc3339_utc(0), "1970-01-01T00:00:00.000000000Z");
  EXPECT_EQ(rfc3339_utc(int64_t{1'700'000'000} * 1'000'000'000 + 123'456'789),
            "2023-11-14T22:13:20.123456789Z");
  EXPECT_EQ(rfc3339_utc(-1), "1969-12-31T23:59:59.999999999Z");
}

TEST(OllamaResponse, FinalObjectCountsOnlyTheTokensEvaluatedNow) {
  const OllamaMeta chat{OllamaKind::Chat, "m:latest"};
  const json j = ollama_final(chat, ended(FinishReason::Length, "x"), Usage{100, 7, 60}, "all");
  EXPECT_EQ(j["model"], "m:latest");
  EXPECT_EQ(j["message"]["role"], "assistant");
  EXPECT_EQ(j["message"]["content"], "all");
  EXPECT_EQ(j["done"], true);
  EXPECT_EQ(j["done_reason"], "length");
  EXPECT_EQ(j["prompt_eval_count"], 40);
  EXPECT_EQ(j["eval_count"], 7);
  EXPECT_EQ(j["total_duration"], 500'000'000);
  EXPECT_EQ(j["prompt_eval_duration"], 125'000'000);
  EXPECT_EQ(j["eval_duration"], 250'000'000);
  const json g = ollama_final(OllamaMeta{OllamaKind::Generate, "m"}, ended(FinishReason::Stop, "x"),
                              Usage{}, "text");
  EXPECT_EQ(g["response"], "text");
  EXPECT_FALSE(g.contains("message"));
  EXPECT_EQ(g["done_reason"], "stop");
}

TEST(OllamaResponse, AnswerWithCallsPutsThemInTheMessage) {
  const std::string reply =
      "Checking. <tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>";
  const json j = ollama_answer(OllamaMeta{OllamaKind::Chat, "m"}, ended(FinishReason::Stop, reply),
                               Usage{}, ToolCallSyntax::Hermes);
  EXPECT_EQ(j["message"]["content"], "Checking.");
  ASSERT_EQ(j["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(j["message"]["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(j["message"]["tool_calls"][0]["function"]["arguments"], json({{"a", 1}}));
  // Without tools the same text is content.
  const json plain = ollama_answer(OllamaMeta{OllamaKind::Chat, "m"},
                                   ended(FinishReason::Stop, reply), Usage{}, ToolCallSyntax::None);
  EXPECT_EQ(plain["message"]["content"], reply);
  EXPECT_FALSE(plain["message"].contains("tool_calls"));
}

TEST(OllamaResponse, StreamLinesRebuildTheAnswerAtEverySplit) {
  for (const std::string& text :
       {std::string("Let me check. <tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}"
                    "</tool_call>"),
        std::string("a <tools are fine <tool_call>{broken"), std::string("plain story")}) {
    SCOPED_TRACE(text);
    const OllamaMeta meta{OllamaKind::Chat, "m"};
    const json whole =
        ollama_answer(meta, ended(FinishReason::Stop, text), Usage{}, ToolCallSyntax::Hermes);
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      auto stream = ollama_stream(meta, ToolCallSyntax::Hermes);
      std::string out = stream->opening();
      out += stream->text(std::string_view(text).substr(0, cut));
      out += stream->text(std::string_view(text).substr(cut));
      out += stream->closing(ended(FinishReason::Stop, text), Usage{});
      const auto lines = lines_of(out);
      ASSERT_FALSE(lines.empty());
      std::string content;
      json calls = json::array();
      for (size_t i = 0; i < lines.size(); ++i) {
        EXPECT_EQ(lines[i]["done"], i + 1 == lines.size());
        content += lines[i]["message"]["content"].get<std::string>();
        if (lines[i]["message"].contains("tool_calls"))
          for (const json& c : lines[i]["message"]["tool_calls"]) calls.push_back(c);
      }
      const std::string want_text =
          whole["message"].contains("tool_calls") ? text.substr(0, text.find("<tool_call>")) : text;
      EXPECT_EQ(content, want_text) << "cut " << cut;
      EXPECT_EQ(calls, whole["message"].value("tool_calls", json::array())) << "cut " << cut;
    }
  }
}

TEST(OllamaResponse, StreamFailureIsAnErrorLine) {
  auto stream = ollama_stream(OllamaMeta{OllamaKind::Generate, "m"});
  const auto lines =
      lines_of(stream->failure(ApiError{500, "generation failed: x", "server_error", "", "", 0}));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], json({{"error", "generation failed: x"}}));
}

}  // namespace
}  // namespace tangram::server
