// Ollama requests: options map onto the engine's parameters under Ollama's names, stream defaults
// to true, messages and tool calls become the template's, and what is not served is refused with
// the field named.
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "server/ollama_request.h"

namespace tangram::server {
namespace {

RequestDefaults defaults() {
  RequestDefaults d;
  d.params.temperature = 0.8f;
  d.vocab_size = 512;
  return d;
}

template <typename T, typename F>
T parsed(F parse, const std::string& body) {
  auto r = parse(body, defaults());
  EXPECT_TRUE(std::holds_alternative<T>(r))
      << body << "\n"
      << (std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r).message : "");
  return std::holds_alternative<T>(r) ? std::get<T>(r) : T{};
}

OllamaChatRequest chat(const std::string& body) {
  return parsed<OllamaChatRequest>(parse_ollama_chat, body);
}

TEST(OllamaRequest, OptionsMapToSamplingParams) {
  const OllamaChatRequest r = chat(R"({"model": "m:latest", "keep_alive": "5m",
      "messages": [{"role": "user", "content": "hi"}],
      "options": {"temperature": 0.2, "top_k": 5, "top_p": 0.5, "min_p": 0.1, "num_predict": 9,
                  "stop": ["END"], "seed": 7, "repeat_penalty": 1.1, "repeat_last_n": 32,
                  "presence_penalty": 0.5, "frequency_penalty": 0.25, "num_ctx": 8192,
                  "num_thread": 4, "mirostat": 0, "typical_p": 1}})");
  EXPECT_EQ(r.gen.model, "m:latest");
  EXPECT_TRUE(r.gen.stream);  // Ollama's default
  EXPECT_EQ(r.gen.params.temperature, 0.2f);
  EXPECT_EQ(r.gen.params.top_k, 5);
  EXPECT_EQ(r.gen.params.top_p, 0.5f);
  EXPECT_EQ(r.gen.params.min_p, 0.1f);
  EXPECT_EQ(r.gen.params.max_tokens, 9);
  EXPECT_EQ(r.gen.params.stop, (std::vector<std::string>{"END"}));
  EXPECT_TRUE(r.gen.params.seed_set);
  EXPECT_EQ(r.gen.params.seed, 7u);
  EXPECT_EQ(r.gen.params.repetition_penalty, 1.1f);
  EXPECT_EQ(r.gen.params.penalty_last_n, 32);
  EXPECT_EQ(r.gen.params.presence_penalty, 0.5f);
  EXPECT_EQ(r.gen.params.frequency_penalty, 0.25f);
}

TEST(OllamaRequest, NumPredictBelowZeroMeansUpToTheContext) {
  for (const char* n : {"-1", "-2"}) {
    const OllamaChatRequest r =
        chat(std::string(R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
        "options": {"num_predict": )") +
             n + "}}");
    EXPECT_EQ(r.gen.params.max_tokens, 0) << n;
  }
}

TEST(OllamaRequest, FormatJsonOrSchema) {
  OllamaChatRequest r =
      chat(R"({"model": "m", "format": "json", "messages": [{"role": "user", "content": "x"}]})");
  ASSERT_TRUE(r.gen.format.has_value());
  EXPECT_TRUE(r.gen.format->any_object);
  r = chat(R"({"model": "m", "format": {"type": "object"}, "stream": false,
      "messages": [{"role": "user", "content": "x"}]})");
  ASSERT_TRUE(r.gen.format.has_value());
  EXPECT_FALSE(r.gen.format->any_object);
  EXPECT_EQ(r.gen.format->schema["type"], "object");
  EXPECT_FALSE(r.gen.stream);
  r = chat(R"({"model": "m", "format": "", "messages": [{"role": "user", "content": "x"}]})");
  EXPECT_FALSE(r.gen.format.has_value());
}

TEST(OllamaRequest, MessagesToolCallsAndToolResults) {
  const OllamaChatRequest r = chat(R"({"model": "m", "messages": [
      {"role": "system", "content": "s"},
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": "",
       "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
      {"role": "tool", "tool_name": "get_weather", "content": "sunny"}],
      "tools": [{"type": "function", "function": {"name": "get_weather",
                 "parameters": {"type": "object"}}}]})");
  ASSERT_EQ(r.messages.size(), 4u);
  ASSERT_TRUE(r.messages[2].tool_calls.has_value());
  EXPECT_EQ((*r.messages[2].tool_calls)[0]["type"], "function");
  EXPECT_EQ((*r.messages[2].tool_calls)[0]["function"]["arguments"]["city"], "Oslo");
  EXPECT_EQ(r.messages[3].role, "tool");
  EXPECT_EQ(r.messages[3].name, "get_weather");
  EXPECT_EQ(r.messages[3].content, "sunny");
  ASSERT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(r.tools[0]["function"]["name"], "get_weather");
}

TEST(OllamaRequest, GenerateFields) {
  auto g = parsed<OllamaGenerateRequest>(parse_ollama_generate,
                                         R"({"model": "m", "prompt": "p", "system": "s",
                                             "raw": true, "options": {"num_predict": 3}})");
  EXPECT_EQ(g.prompt, "p");
  EXPECT_EQ(g.system, "s");
  EXPECT_TRUE(g.raw);
  EXPECT_FALSE(g.load_only);
  EXPECT_EQ(g.gen.params.max_tokens, 3);
  g = parsed<OllamaGenerateRequest>(parse_ollama_generate, R"({"model": "m"})");
  EXPECT_TRUE(g.load_only);
}

TEST(OllamaRequest, ShowTakesModelOrName) {
  EXPECT_EQ(std::get<std::string>(parse_ollama_show(R"({"model": "a"})")), "a");
  EXPECT_EQ(std::get<std::string>(parse_ollama_show(R"({"name": "b"})")), "b");
  EXPECT_TRUE(std::holds_alternative<ApiError>(parse_ollama_show(R"({})")));
}

TEST(OllamaRequest, RefusalsNameTheField) {
  const std::string user = R"("messages": [{"role": "user", "content": "x"}])";
  const struct {
    std::string body;
    std::string field;
  } chats[] = {
      {"{" + user + "}", "model"},
      {R"({"model": "m"})", "messages"},
      {R"({"model": "m", "messages": []})", "messages"},
      {R"({"model": "m", "messages": [{"role": "robot", "content": "x"}]})", "messages[0].role"},
      {R"({"model": "m", "messages": [{"role": "user", "content": 5}]})", "content"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x", "images": ["AA"]}]})",
       "messages[0].images"},
      {R"({"model": "m", "messages": [{"role": "assistant", "content": "",
          "tool_calls": [{"function": {"arguments": {}}}]}]})",
       "messages[0].tool_calls[0]"},
      {R"({"model": "m", "options": [1], )" + user + "}", "options"},
      {R"({"model": "m", "options": {"temperature": "hot"}, )" + user + "}", "temperature"},
      {R"({"model": "m", "options": {"num_predict": 0}, )" + user + "}", "options.num_predict"},
      {R"({"model": "m", "options": {"stop": [""]}, )" + user + "}", "options.stop"},
      {R"({"model": "m", "options": {"mirostat": 2}, )" + user + "}", "options.mirostat"},
      {R"({"model": "m", "options": {"typical_p": 0.5}, )" + user + "}", "options.typical_p"},
      {R"({"model": "m", "format": "yaml", )" + user + "}", "format"},
      {R"({"model": "m", "think": true, )" + user + "}", "think"},
      {R"({"model": "m", "tools": [{"type": "function"}], )" + user + "}", "tools[0].function"},
  };
  for (const auto& c : chats) {
    SCOPED_TRACE(c.body);
    auto r = parse_ollama_chat(c.body, defaults());
    ASSERT_TRUE(std::holds_alternative<ApiError>(r));
    EXPECT_EQ(std::get<ApiError>(r).status, 400);
    EXPECT_EQ(std::get<ApiError>(r).param, c.field) << std::get<ApiError>(r).message;
  }
  for (const auto& [body, field] : std::vector<std::pair<std::string, std::string>>{
           {R"({"model": "m", "prompt": "p", "images": ["AA"]})", "images"},
           {R"({"model": "m", "prompt": "p", "suffix": "s"})", "suffix"},
           {R"({"model": "m", "prompt": "p", "template": "{{ .Prompt }}"})", "template"},
           {R"({"model": "m", "prompt": "p", "context": [1, 2]})", "context"}}) {
    SCOPED_TRACE(body);
    auto r = parse_ollama_generate(body, defaults());
    ASSERT_TRUE(std::holds_alternative<ApiError>(r));
    EXPECT_EQ(std::get<ApiError>(r).param, field);
  }
}

}  // namespace
}  // namespace tangram::server
