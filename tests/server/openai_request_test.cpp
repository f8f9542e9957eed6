// The request parser against malformed and hostile bodies: each gets a 400 naming the field,
// never an exception or a crash; and well-formed bodies map onto the engine's parameters.
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "server/openai_request.h"

namespace tangram::server {
namespace {

RequestDefaults defaults() {
  RequestDefaults d;
  d.params.temperature = 1.0f;
  d.params.top_p = 1.0f;
  d.vocab_size = 512;
  return d;
}

const char* kUser = R"("messages": [{"role": "user", "content": "hi"}])";

TEST(OpenAiRequest, ChatFieldsMapToSamplingParams) {
  const std::string body =
      std::string("{") + kUser +
      R"(, "model": "m", "max_completion_tokens": 7, "temperature": 0, "top_p": 0.5,
      "stop": ["a", "b"], "seed": 42, "presence_penalty": 0.5, "frequency_penalty": -1, "stream": true,
      "stream_options": {"include_usage": true}, "session_id": "chat-1", "user": "ignored", "n": 3})";
  auto r = parse_chat_request(body, defaults());
  ASSERT_TRUE(std::holds_alternative<ChatCompletionRequest>(r)) << std::get<ApiError>(r).message;
  const auto& c = std::get<ChatCompletionRequest>(r);
  EXPECT_EQ(c.gen.model, "m");
  EXPECT_EQ(c.gen.params.max_tokens, 7);
  EXPECT_EQ(c.gen.params.temperature, 0.0f);
  EXPECT_EQ(c.gen.params.top_p, 0.5f);
  EXPECT_EQ(c.gen.params.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(c.gen.params.seed_set);
  EXPECT_EQ(c.gen.params.seed, 42u);
  EXPECT_EQ(c.gen.params.presence_penalty, 0.5f);
  EXPECT_EQ(c.gen.params.frequency_penalty, -1.0f);
  EXPECT_TRUE(c.gen.stream);
  EXPECT_TRUE(c.gen.include_usage);
  EXPECT_EQ(c.gen.session_id, "chat-1");
  EXPECT_EQ(c.gen.n, 3);
  ASSERT_EQ(c.messages.size(), 1u);
  EXPECT_EQ(c.messages[0].content, "hi");
}

TEST(OpenAiRequest, ContentPartsAndRolesAreNormalised) {
  auto r = parse_chat_request(R"({"messages": [
      {"role": "developer", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null},
      {"role": "user", "content": "c"}]})",
                              defaults());
  ASSERT_TRUE(std::holds_alternative<ChatCompletionRequest>(r)) << std::get<ApiError>(r).message;
  const auto& m = std::get<ChatCompletionRequest>(r).messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_EQ(m[1].content, "ab");
  EXPECT_EQ(m[2].content, "");
  const auto d = defaults();
  EXPECT_EQ(std::get<ChatCompletionRequest>(r).gen.params.temperature, d.params.temperature);
}

TEST(OpenAiRequest, CompletionPromptForms) {
  auto text = parse_completion_request(R"({"prompt": "Once"})", defaults());
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(text));
  EXPECT_EQ(std::get<std::string>(std::get<CompletionRequest>(text).prompt), "Once");
  EXPECT_EQ(std::get<CompletionRequest>(text).gen.params.max_tokens, 16);  // OpenAI's default
  auto ids = parse_completion_request(R"({"prompt": [1, 2, 511], "max_tokens": 3, "echo": true})",
                                      defaults());
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(ids));
  EXPECT_EQ(std::get<std::vector<int32_t>>(std::get<CompletionRequest>(ids).prompt),
            (std::vector<int32_t>{1, 2, 511}));
  EXPECT_TRUE(std::get<CompletionRequest>(ids).echo);
  auto one = parse_completion_request(R"({"prompt": ["x"]})", defaults());
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(one));
}

struct BadCase {
  const char* name;
  std::string body;
  std::string param;  // expected param ("" = none)
  std::string code;   // expected code
};

std::string chat_with(const std::string& extra) {
  return std::string("{") + kUser + ", " + extra + "}";
}

std::vector<BadCase> bad_chat_cases() {
  return {
      {"empty body", "", "", "invalid_json"},
      {"broken json", R"({"messages": [)", "", "invalid_json"},
      {"trailing garbage", std::string("{") + kUser + "} x", "", "invalid_json"},
      {"not an object", "[1, 2]", "", "invalid_json"},
      {"a bare string", "\"hello\"", "", "invalid_json"},
      {"invalid utf-8", "{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\xfe\"}]}", "",
       "invalid_json"},
      {"truncated utf-8", "{\"messages\": [{\"role\": \"user\", \"content\": \"\xe2\x82\"}]}", "",
       "invalid_json"},
      {"missing messages", R"({"model": "x"})", "messages", "missing_field"},
      {"messages null", R"({"messages": null})", "messages", "missing_field"},
      {"messages a string", R"({"messages": "hi"})", "messages", "invalid_type"},
      {"messages empty", R"({"messages": []})", "messages", "empty_messages"},
      {"message not an object", R"({"messages": [3]})", "messages[0]", "invalid_type"},
      {"role missing", R"({"messages": [{"content": "x"}]})", "messages[0].role", "missing_field"},
      {"role unknown", R"({"messages": [{"role": "wizard", "content": "x"}]})", "messages[0].role",
       "invalid_value"},
      {"role a number", R"({"messages": [{"role": 1, "content": "x"}]})", "messages[0].role",
       "missing_field"},
      {"content missing", R"({"messages": [{"role": "user"}]})", "messages[0].content",
       "missing_field"},
      {"content a number", R"({"messages": [{"role": "user", "content": 5}]})",
       "messages[0].content", "invalid_type"},
      {"image part",
       R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})",
       "messages[0].content", "unsupported_value"},
      {"no user message", R"({"messages": [{"role": "system", "content": "x"}]})", "messages",
       "empty_messages"},
      {"max_tokens negative", chat_with(R"("max_tokens": -1)"), "max_tokens", "out_of_range"},
      {"max_tokens zero", chat_with(R"("max_tokens": 0)"), "max_tokens", "out_of_range"},
      {"max_tokens huge", chat_with(R"("max_tokens": 100000000000000000000000)"), "max_tokens",
       "out_of_range"},
      {"max_tokens fractional", chat_with(R"("max_tokens": 1.5)"), "max_tokens", "out_of_range"},
      {"max_tokens a string", chat_with(R"("max_tokens": "10")"), "max_tokens", "invalid_type"},
      {"temperature too high", chat_with(R"("temperature": 2.5)"), "temperature", "out_of_range"},
      {"temperature overflow", chat_with(R"("temperature": 1e400)"), "", "invalid_json"},
      {"temperature a string", chat_with(R"("temperature": "hot")"), "temperature", "invalid_type"},
      {"top_p zero", chat_with(R"("top_p": 0)"), "top_p", "out_of_range"},
      {"top_p above one", chat_with(R"("top_p": 1.5)"), "top_p", "out_of_range"},
      {"presence_penalty", chat_with(R"("presence_penalty": -3)"), "presence_penalty",
       "out_of_range"},
      {"frequency_penalty", chat_with(R"("frequency_penalty": 2.01)"), "frequency_penalty",
       "out_of_range"},
      {"stop a number", chat_with(R"("stop": 3)"), "stop", "invalid_type"},
      {"stop five strings", chat_with(R"("stop": ["a","b","c","d","e"])"), "stop", "out_of_range"},
      {"stop empty string", chat_with(R"("stop": [""])"), "stop", "out_of_range"},
      {"seed a string", chat_with(R"("seed": "1")"), "seed", "invalid_type"},
      {"stream a string", chat_with(R"("stream": "yes")"), "stream", "invalid_type"},
      {"stream_options without stream", chat_with(R"("stream_options": {"include_usage": true})"),
       "stream_options", ""},
      {"n = 0", chat_with(R"("n": 0)"), "n", "out_of_range"},
      {"n = 17", chat_with(R"("n": 17)"), "n", "out_of_range"},
      {"n a string", chat_with(R"("n": "2")"), "n", "invalid_type"},
      {"logprobs a string", chat_with(R"("logprobs": "yes")"), "logprobs", "invalid_type"},
      {"tool without function", chat_with(R"("tools": [{"type": "function"}])"),
       "tools[0].function", "missing_field"},
      {"tools an object", chat_with(R"("tools": {"type": "function"})"), "tools", "invalid_type"},
      {"tool_choice required without tools", chat_with(R"("tool_choice": "required")"),
       "tool_choice", "invalid_value"},
      {"tool_choice named without name",
       chat_with(R"("tool_choice": {"type": "function", "function": {}})"), "tool_choice",
       "invalid_value"},
      {"tool_choice unknown", chat_with(R"("tool_choice": "always")"), "tool_choice",
       "invalid_value"},
      {"json schema without its object", chat_with(R"("response_format": {"type": "json_schema"})"),
       "response_format.json_schema", "missing_field"},
      {"unknown format", chat_with(R"("response_format": {"type": "yaml"})"),
       "response_format.type", "invalid_value"},
      {"logit_bias", chat_with(R"("logit_bias": {"1": 5})"), "logit_bias", "unsupported_parameter"},
      {"web_search_options", chat_with(R"("web_search_options": {})"), "web_search_options",
       "unsupported_parameter"},
      {"best_of", chat_with(R"("best_of": 3)"), "best_of", "unsupported_parameter"},
      {"session id with slash", chat_with(R"("session_id": "a/b")"), "session_id",
       "invalid_session_id"},
      {"session id too long", chat_with("\"session_id\": \"" + std::string(129, 'a') + "\""),
       "session_id", "invalid_session_id"},
      {"model a number", chat_with(R"("model": 7)"), "model", "invalid_type"},
  };
}

TEST(OpenAiRequest, MalformedChatBodiesGetClearErrors) {
  for (const BadCase& c : bad_chat_cases()) {
    SCOPED_TRACE(c.name);
    auto r = parse_chat_request(c.body, defaults());
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << "accepted: " << c.body;
    const ApiError& e = std::get<ApiError>(r);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.type, "invalid_request_error");
    EXPECT_EQ(e.param, c.param) << e.message;
    if (!c.code.empty()) {
      EXPECT_EQ(e.code, c.code) << e.message;
    }
    EXPECT_FALSE(e.message.empty());
  }
}

TEST(OpenAiRequest, MalformedCompletionBodiesGetClearErrors) {
  const std::vector<BadCase> cases = {
      {"missing prompt", R"({"max_tokens": 3})", "prompt", "missing_field"},
      {"empty prompt", R"({"prompt": ""})", "prompt", "empty_prompt"},
      {"empty token list", R"({"prompt": []})", "prompt", "empty_prompt"},
      {"token out of vocabulary", R"({"prompt": [1, 512]})", "prompt", "invalid_token"},
      {"negative token", R"({"prompt": [-1]})", "prompt", "invalid_token"},
      {"token a float", R"({"prompt": [1.5]})", "prompt[]", "invalid_type"},
      {"batch of prompts", R"({"prompt": ["a", "b"]})", "prompt", "unsupported_value"},
      {"batch of token lists", R"({"prompt": [[1], [2]]})", "prompt", "unsupported_value"},
      {"prompt an object", R"({"prompt": {}})", "prompt", "invalid_type"},
      {"echo a number", R"({"prompt": "x", "echo": 1})", "echo", "invalid_type"},
      {"suffix", R"({"prompt": "x", "suffix": "y"})", "suffix", "unsupported_parameter"},
      {"best_of 2", R"({"prompt": "x", "best_of": 2})", "best_of", "unsupported_parameter"},
      {"best_of a string", R"({"prompt": "x", "best_of": "1"})", "best_of",
       "unsupported_parameter"},
      {"echo with logprobs", R"({"prompt": "x", "echo": true, "logprobs": 1})", "echo",
       "unsupported_parameter"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = parse_completion_request(c.body, defaults());
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << "accepted: " << c.body;
    EXPECT_EQ(std::get<ApiError>(r).param, c.param) << std::get<ApiError>(r).message;
    EXPECT_EQ(std::get<ApiError>(r).code, c.code) << std::get<ApiError>(r).message;
  }
}

TEST(OpenAiRequest, ToolsAndToolMessages) {
  const std::string body = R"({"tools": [{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}], "tool_choice": "auto",
      "messages": [{"role": "user", "content": "weather?"},
                   {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
                   {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]})";
  auto r = parse_chat_request(body, defaults());
  ASSERT_TRUE(std::holds_alternative<ChatCompletionRequest>(r)) << std::get<ApiError>(r).message;
  const auto& c = std::get<ChatCompletionRequest>(r);
  ASSERT_EQ(c.tools.size(), 1u);
  EXPECT_EQ(c.tools[0]["function"]["name"], "get_weather");
  ASSERT_EQ(c.messages.size(), 3u);
  ASSERT_TRUE(c.messages[1].tool_calls.has_value());
  // Templates read the arguments as an object, as Hugging Face's messages hold them.
  EXPECT_EQ((*c.messages[1].tool_calls)[0]["function"]["arguments"]["city"], "Oslo");
  EXPECT_EQ((*c.messages[1].tool_calls)[0]["id"], "call_1");
  EXPECT_EQ(c.messages[2].tool_call_id, "call_1");
  // tool_choice "none": the model is not told of the tools.
  auto none = parse_chat_request(
      R"({"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "none",
      "messages": [{"role": "user", "content": "hi"}]})",
      defaults());
  ASSERT_TRUE(std::holds_alternative<ChatCompletionRequest>(none));
  EXPECT_TRUE(std::get<ChatCompletionRequest>(none).tools.empty());
  // Arguments that are not a JSON object's text are refused, naming the call.
  auto bad =
      parse_chat_request(R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant",
      "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{oops"}}]}]})",
                         defaults());
  ASSERT_TRUE(std::holds_alternative<ApiError>(bad));
  EXPECT_EQ(std::get<ApiError>(bad).param, "messages[1].tool_calls[0]");
  // Completions take no tools.
  auto completion = parse_completion_request(
      R"({"prompt": "x", "tools": [{"type": "function", "function": {"name": "f"}}]})", defaults());
  ASSERT_TRUE(std::holds_alternative<ApiError>(completion));
  EXPECT_EQ(std::get<ApiError>(completion).param, "tools");
}

TEST(OpenAiRequest, SessionIdCharset) {
  EXPECT_TRUE(valid_session_id("chat-1.a_b:c"));
  EXPECT_FALSE(valid_session_id(""));
  EXPECT_FALSE(valid_session_id("a b"));
  EXPECT_FALSE(valid_session_id("ä"));
  EXPECT_TRUE(valid_session_id(std::string(128, 'x')));
  EXPECT_FALSE(valid_session_id(std::string(129, 'x')));
}

}  // namespace
}  // namespace tangram::server
