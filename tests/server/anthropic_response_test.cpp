// Anthropic Messages responses: the message object, the stop reasons, usage split into fresh and
// cache-read tokens, errors, and the streamed event sequence, text and tool calls alike, whatever
// the deltas' cuts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/anthropic_response.h"
#include "server/stream_formats.h"

namespace tangram::server {
namespace {

using nlohmann::json;

MessageMeta meta() { return MessageMeta{"msg_1", "m", 12}; }

RequestResult ended(FinishReason finish, std::string text, int stop_index = -1) {
  RequestResult r;
  r.finish = finish;
  r.text = std::move(text);
  r.stop_index = stop_index;
  return r;
}

struct Event {
  std::string name;
  json data;
};

// "event: NAME\ndata: JSON\n\n" frames, checked to name the type their data holds.
std::vector<Event> events_of(const std::string& sse) {
  std::vector<Event> out;
  size_t at = 0;
  while (at < sse.size()) {
    const size_t end = sse.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "unterminated frame";
    if (end == std::string::npos) break;
    const std::string frame = sse.substr(at, end - at);
    at = end + 2;
    const size_t nl = frame.find('\n');
    EXPECT_EQ(frame.rfind("event: ", 0), 0u) << frame;
    EXPECT_EQ(frame.compare(nl + 1, 6, "data: "), 0) << frame;
    Event e{frame.substr(7, nl - 7), json::parse(frame.substr(nl + 7))};
    EXPECT_EQ(e.data["type"], e.name);
    out.push_back(std::move(e));
  }
  return out;
}

std::string streamed_text(const std::vector<Event>& events) {
  std::string text;
  for (const Event& e : events)
    if (e.name == "content_block_delta" && e.data["delta"]["type"] == "text_delta")
      text += e.data["delta"]["text"].get<std::string>();
  return text;
}

TEST(AnthropicResponse, ErrorTypesFollowTheStatus) {
  EXPECT_EQ(anthropic_error_type(400), "invalid_request_error");
  EXPECT_EQ(anthropic_error_type(401), "authentication_error");
  EXPECT_EQ(anthropic_error_type(403), "permission_error");
  EXPECT_EQ(anthropic_error_type(404), "not_found_error");
  EXPECT_EQ(anthropic_error_type(413), "request_too_large");
  EXPECT_EQ(anthropic_error_type(415), "invalid_request_error");
  EXPECT_EQ(anthropic_error_type(429), "rate_limit_error");
  EXPECT_EQ(anthropic_error_type(500), "api_error");
  EXPECT_EQ(anthropic_error_type(503), "overloaded_error");
  const auto j =
      anthropic_error_json(ApiError{404, "no such model", "invalid_request_error", "", "", 0});
  EXPECT_EQ(j["type"], "error");
  EXPECT_EQ(j["error"]["type"], "not_found_error");
  EXPECT_EQ(j["error"]["message"], "no such model");
}

TEST(AnthropicResponse, UsageSplitsFreshAndCacheReadTokens) {
  const auto u = anthropic_usage_json(Usage{100, 7, 60});
  EXPECT_EQ(u["input_tokens"], 40);
  EXPECT_EQ(u["cache_read_input_tokens"], 60);
  EXPECT_EQ(u["cache_creation_input_tokens"], 0);
  EXPECT_EQ(u["output_tokens"], 7);
}

TEST(AnthropicResponse, StopReasons) {
  const std::vector<std::string> stops = {"END", "##"};
  EXPECT_EQ(message_stop(ended(FinishReason::Stop, "a"), stops, false).reason, "end_turn");
  EXPECT_EQ(message_stop(ended(FinishReason::Length, "a"), stops, false).reason, "max_tokens");
  const MessageStop s = message_stop(ended(FinishReason::Stop, "a", 1), stops, false);
  EXPECT_EQ(s.reason, "stop_sequence");
  EXPECT_EQ(s.sequence, "##");
  EXPECT_TRUE(message_stop(ended(FinishReason::Stop, "a"), stops, false).sequence.is_null());
  EXPECT_EQ(message_stop(ended(FinishReason::Stop, "a"), stops, true).reason, "tool_use");
}

TEST(AnthropicResponse, MessageOfTextKeepsItUntrimmed) {
  const auto j = message_json(meta(), ended(FinishReason::Length, " once upon "), {},
                              ToolCallSyntax::None, Usage{12, 3, 0});
  EXPECT_EQ(j["id"], "msg_1");
  EXPECT_EQ(j["type"], "message");
  EXPECT_EQ(j["role"], "assistant");
  EXPECT_EQ(j["model"], "m");
  ASSERT_EQ(j["content"].size(), 1u);
  EXPECT_EQ(j["content"][0]["type"], "text");
  EXPECT_EQ(j["content"][0]["text"], " once upon ");
  EXPECT_EQ(j["stop_reason"], "max_tokens");
  EXPECT_TRUE(j["stop_sequence"].is_null());
  EXPECT_EQ(j["usage"]["output_tokens"], 3);
}

TEST(AnthropicResponse, MessageOfACallHasToolUseBlocks) {
  const std::string reply =
      "Checking. <tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>";
  const auto j =
      message_json(meta(), ended(FinishReason::Stop, reply), {}, ToolCallSyntax::Hermes, Usage{});
  ASSERT_EQ(j["content"].size(), 2u);
  EXPECT_EQ(j["content"][0]["text"], "Checking.");
  EXPECT_EQ(j["content"][1]["type"], "tool_use");
  EXPECT_EQ(j["content"][1]["name"], "f");
  EXPECT_EQ(j["content"][1]["input"], json({{"a", 1}}));
  EXPECT_EQ(j["content"][1]["id"].get<std::string>().rfind("toolu_", 0), 0u);
  EXPECT_EQ(j["stop_reason"], "tool_use");
}

TEST(AnthropicResponse, EmptyReplyHasNoBlocks) {
  const auto j =
      message_json(meta(), ended(FinishReason::Stop, ""), {}, ToolCallSyntax::None, Usage{});
  EXPECT_TRUE(j["content"].empty());
  EXPECT_EQ(j["stop_reason"], "end_turn");
}

TEST(AnthropicResponse, StreamOfTextFollowsAnthropicsOrder) {
  auto stream = messages_stream(meta(), {"END"});
  std::string sse = stream->opening();
  sse += stream->text("Once");
  sse += stream->text("");
  sse += stream->text(" upon");
  sse += stream->closing(ended(FinishReason::Stop, "Once upon", 0), Usage{12, 2, 5});
  const auto ev = events_of(sse);
  std::vector<std::string> names;
  for (const Event& e : ev) names.push_back(e.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"message_start", "content_block_start", "content_block_delta",
                                      "content_block_delta", "content_block_stop", "message_delta",
                                      "message_stop"}));
  EXPECT_EQ(ev[0].data["message"]["id"], "msg_1");
  EXPECT_TRUE(ev[0].data["message"]["content"].empty());
  EXPECT_EQ(ev[0].data["message"]["usage"]["input_tokens"], 12);
  EXPECT_EQ(ev[1].data["index"], 0);
  EXPECT_EQ(ev[1].data["content_block"], json({{"type", "text"}, {"text", ""}}));
  EXPECT_EQ(streamed_text(ev), "Once upon");
  EXPECT_EQ(ev[4].data["index"], 0);
  EXPECT_EQ(ev[5].data["delta"]["stop_reason"], "stop_sequence");
  EXPECT_EQ(ev[5].data["delta"]["stop_sequence"], "END");
  EXPECT_EQ(ev[5].data["usage"]["input_tokens"], 7);
  EXPECT_EQ(ev[5].data["usage"]["cache_read_input_tokens"], 5);
  EXPECT_EQ(ev[5].data["usage"]["output_tokens"], 2);
}

// However the reply is cut, the stream's text and tool_use blocks are what the whole reply makes.
TEST(AnthropicResponse, StreamSendsTheSameAtEverySplitOfTheReply) {
  for (const std::string& text :
       {std::string(
            "Let me check. <tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>"
            "<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>"),
        std::string("a <tools are fine <tool_call>{broken"), std::string("plain story")}) {
    SCOPED_TRACE(text);
    const json whole =
        message_json(meta(), ended(FinishReason::Stop, text), {}, ToolCallSyntax::Hermes, Usage{});
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      auto stream = messages_stream(meta(), {}, ToolCallSyntax::Hermes);
      std::string sse = stream->opening();
      sse += stream->text(std::string_view(text).substr(0, cut));
      sse += stream->text(std::string_view(text).substr(cut));
      sse += stream->closing(ended(FinishReason::Stop, text), Usage{});
      const auto ev = events_of(sse);
      // Rebuild the content blocks from the events, as the SDK does.
      json blocks = json::array();
      int open = -1;
      for (const Event& e : ev) {
        if (e.name == "content_block_start") {
          ASSERT_EQ(open, -1) << "a block opened inside another";
          open = e.data["index"];
          ASSERT_EQ(open, static_cast<int>(blocks.size()));
          blocks.push_back(e.data["content_block"]);
          if (blocks.back()["type"] == "tool_use") blocks.back()["input_text"] = "";
        } else if (e.name == "content_block_delta") {
          ASSERT_EQ(e.data["index"], open);
          const json& d = e.data["delta"];
          if (d["type"] == "text_delta")
            blocks[static_cast<size_t>(open)]["text"] =
                blocks[static_cast<size_t>(open)]["text"].get<std::string>() +
                d["text"].get<std::string>();
          else
            blocks[static_cast<size_t>(open)]["input_text"] =
                blocks[static_cast<size_t>(open)]["input_text"].get<std::string>() +
                d["partial_json"].get<std::string>();
        } else if (e.name == "content_block_stop") {
          ASSERT_EQ(e.data["index"], open);
          open = -1;
        }
      }
      EXPECT_EQ(open, -1);
      EXPECT_EQ(ev.back().name, "message_stop");
      EXPECT_EQ(ev[ev.size() - 2].data["delta"]["stop_reason"], whole["stop_reason"]);
      const json& want = whole["content"];
      size_t tool_blocks = 0;
      std::string text_sent;
      for (const json& b : blocks) {
        if (b["type"] == "text") {
          text_sent += b["text"].get<std::string>();
          continue;
        }
        ++tool_blocks;
        const json* w = nullptr;
        for (const json& x : want)
          if (x["type"] == "tool_use" && x["name"] == b["name"]) w = &x;
        ASSERT_NE(w, nullptr);
        EXPECT_EQ(json::parse(b["input_text"].get<std::string>()), (*w)["input"]);
      }
      size_t want_tools = 0;
      for (const json& x : want) want_tools += x["type"] == "tool_use" ? 1 : 0;
      EXPECT_EQ(tool_blocks, want_tools);
      // Text: everything before the first call (whitespace included), or all of it.
      const std::string want_text =
          want_tools > 0 ? text.substr(0, text.find("<tool_call>")) : text;
      EXPECT_EQ(text_sent, want_text) << "cut " << cut;
    }
  }
}

TEST(AnthropicResponse, StreamFailureIsAnErrorEvent) {
  auto stream = messages_stream(meta(), {});
  const auto ev =
      events_of(stream->failure(ApiError{500, "generation failed: x", "server_error", "", "", 0}));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].name, "error");
  EXPECT_EQ(ev[0].data["error"]["type"], "api_error");
  EXPECT_EQ(ev[0].data["error"]["message"], "generation failed: x");
}

}  // namespace
}  // namespace tangram::server
