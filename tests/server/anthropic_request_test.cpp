// Anthropic Messages requests: content blocks become the chat template's messages (tool_use as
// tool_calls, tool_result as tool messages), the fields map onto the engine's parameters, and
// every malformed or unsupported body gets a 400 naming the field, never an exception.
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "server/anthropic_request.h"

namespace tangram::server {
namespace {

RequestDefaults defaults() {
  RequestDefaults d;
  d.params.temperature = 0.8f;
  d.vocab_size = 512;
  return d;
}

MessagesRequest parsed(const std::string& body, bool count_only = false) {
  auto r = parse_messages_request(body, defaults(), count_only);
  EXPECT_TRUE(std::holds_alternative<MessagesRequest>(r))
      << body << "\n"
      << (std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r).message : "");
  return std::holds_alternative<MessagesRequest>(r) ? std::get<MessagesRequest>(r)
                                                    : MessagesRequest{};
}

ApiError refused(const std::string& body, bool count_only = false) {
  auto r = parse_messages_request(body, defaults(), count_only);
  EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << body;
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

TEST(AnthropicRequest, FieldsMapToSamplingParams) {
  const MessagesRequest r = parsed(R"({"model": "m", "max_tokens": 7, "temperature": 0.25,
      "top_p": 0.5, "top_k": 3, "stop_sequences": ["END", "##"], "stream": true,
      "metadata": {"user_id": "u"}, "service_tier": "auto", "session_id": "s-1",
      "messages": [{"role": "user", "content": "hi"}]})");
  EXPECT_EQ(r.gen.model, "m");
  EXPECT_EQ(r.gen.params.max_tokens, 7);
  EXPECT_EQ(r.gen.params.temperature, 0.25f);
  EXPECT_EQ(r.gen.params.top_p, 0.5f);
  EXPECT_EQ(r.gen.params.top_k, 3);
  EXPECT_EQ(r.gen.params.stop, (std::vector<std::string>{"END", "##"}));
  EXPECT_TRUE(r.gen.stream);
  EXPECT_EQ(r.gen.session_id, "s-1");
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].role, "user");
  EXPECT_EQ(r.messages[0].content, "hi");
}

TEST(AnthropicRequest, UnsetSamplingFieldsKeepTheServerDefaults) {
  const MessagesRequest r =
      parsed(R"({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "x"}]})");
  EXPECT_EQ(r.gen.params.temperature, 0.8f);
  EXPECT_FALSE(r.gen.stream);
}

TEST(AnthropicRequest, SystemStringOrTextBlocksComesFirst) {
  const MessagesRequest a = parsed(R"({"model": "m", "max_tokens": 1, "system": "be brief",
      "messages": [{"role": "user", "content": "x"}]})");
  ASSERT_EQ(a.messages.size(), 2u);
  EXPECT_EQ(a.messages[0].role, "system");
  EXPECT_EQ(a.messages[0].content, "be brief");
  const MessagesRequest b = parsed(R"({"model": "m", "max_tokens": 1,
      "system": [{"type": "text", "text": "one"}, {"type": "text", "text": "two",
                  "cache_control": {"type": "ephemeral"}}],
      "messages": [{"role": "user", "content": "x"}]})");
  EXPECT_EQ(b.messages[0].content, "one\n\ntwo");
}

TEST(AnthropicRequest, TextBlocksJoinIntoTheMessage) {
  const MessagesRequest r = parsed(R"({"model": "m", "max_tokens": 1, "messages": [
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": [{"type": "text", "text": "c"}]},
      {"role": "user", "content": "d"}]})");
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].content, "ab");
  EXPECT_EQ(r.messages[1].role, "assistant");
  EXPECT_EQ(r.messages[1].content, "c");
  EXPECT_FALSE(r.messages[1].tool_calls.has_value());
}

TEST(AnthropicRequest, ToolUseAndToolResultBecomeToolCallsAndToolMessages) {
  const MessagesRequest r = parsed(R"({"model": "m", "max_tokens": 1, "messages": [
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": [{"type": "text", "text": "Checking."},
          {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
          {"type": "tool_use", "id": "toolu_2", "name": "get_time", "input": {}}]},
      {"role": "user", "content": [
          {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
          {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
           "content": [{"type": "text", "text": "no clock"}]},
          {"type": "text", "text": "thanks"}]}]})");
  ASSERT_EQ(r.messages.size(), 5u);
  const ChatMessage& a = r.messages[1];
  EXPECT_EQ(a.content, "Checking.");
  ASSERT_TRUE(a.tool_calls.has_value());
  ASSERT_EQ(a.tool_calls->size(), 2u);
  EXPECT_EQ((*a.tool_calls)[0]["id"], "toolu_1");
  EXPECT_EQ((*a.tool_calls)[0]["type"], "function");
  EXPECT_EQ((*a.tool_calls)[0]["function"]["name"], "get_weather");
  EXPECT_EQ((*a.tool_calls)[0]["function"]["arguments"]["city"], "Oslo");  // an object
  EXPECT_EQ(r.messages[2].role, "tool");
  EXPECT_EQ(r.messages[2].tool_call_id, "toolu_1");
  EXPECT_EQ(r.messages[2].content, "sunny");
  EXPECT_EQ(r.messages[3].tool_call_id, "toolu_2");
  EXPECT_EQ(r.messages[3].content, "Error: no clock");
  EXPECT_EQ(r.messages[4].role, "user");  // the user's own text after the results
  EXPECT_EQ(r.messages[4].content, "thanks");
}

TEST(AnthropicRequest, AUserMessageOfResultsOnlyAddsNoEmptyUserTurn) {
  const MessagesRequest r = parsed(R"({"model": "m", "max_tokens": 1, "messages": [
      {"role": "user", "content": "q"},
      {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r"}]}]})");
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages.back().role, "tool");
}

TEST(AnthropicRequest, ThinkingBlocksOfEarlierTurnsAreLeftOut) {
  const MessagesRequest r = parsed(R"({"model": "m", "max_tokens": 1, "messages": [
      {"role": "user", "content": "q"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                                        {"type": "text", "text": "a"}]},
      {"role": "user", "content": "r"}]})");
  EXPECT_EQ(r.messages[1].content, "a");
}

TEST(AnthropicRequest, ToolsBecomeFunctionsAndToolChoiceMaps) {
  const std::string tools =
      R"("tools": [{"name": "f", "description": "d", "input_schema": {"type": "object"}},
                   {"name": "g", "input_schema": {"type": "object"}, "type": "custom"}],
         "messages": [{"role": "user", "content": "x"}])";
  MessagesRequest r = parsed(R"({"model": "m", "max_tokens": 1, )" + tools + "}");
  ASSERT_EQ(r.tools.size(), 2u);
  EXPECT_EQ(r.tools[0]["type"], "function");
  EXPECT_EQ(r.tools[0]["function"]["name"], "f");
  EXPECT_EQ(r.tools[0]["function"]["description"], "d");
  EXPECT_EQ(r.tools[0]["function"]["parameters"]["type"], "object");
  EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::Auto);
  r = parsed(R"({"model": "m", "max_tokens": 1, "tool_choice": {"type": "any"}, )" + tools + "}");
  EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::Required);
  EXPECT_TRUE(r.parallel_tool_calls);
  r = parsed(R"({"model": "m", "max_tokens": 1, "tool_choice": {"type": "tool", "name": "g",
      "disable_parallel_tool_use": true}, )" +
             tools + "}");
  EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::Named);
  EXPECT_EQ(r.tool_choice.name, "g");
  EXPECT_FALSE(r.parallel_tool_calls);
  r = parsed(R"({"model": "m", "max_tokens": 1, "tool_choice": {"type": "none"}, )" + tools + "}");
  EXPECT_TRUE(r.tools.empty());  // the model is not told of them
}

TEST(AnthropicRequest, CountTokensNeedsNoMaxTokens) {
  const MessagesRequest r =
      parsed(R"({"model": "m", "messages": [{"role": "user", "content": "x"}]})", true);
  EXPECT_EQ(r.messages.size(), 1u);
}

TEST(AnthropicRequest, MalformedAndUnsupportedBodiesNameTheField) {
  const std::string user = R"("messages": [{"role": "user", "content": "x"}])";
  const struct {
    std::string body;
    std::string field;
  } cases[] = {
      {"", ""},
      {"[1]", ""},
      {R"({"max_tokens": 1, )" + user + "}", "model"},
      {R"({"model": "m", )" + user + "}", "max_tokens"},
      {R"({"model": "m", "max_tokens": 0, )" + user + "}", "max_tokens"},
      {R"({"model": "m", "max_tokens": "5", )" + user + "}", "max_tokens"},
      {R"({"model": "m", "max_tokens": 1, "temperature": 1.5, )" + user + "}", "temperature"},
      {R"({"model": "m", "max_tokens": 1, "top_p": 0, )" + user + "}", "top_p"},
      {R"({"model": "m", "max_tokens": 1, "stop_sequences": "x", )" + user + "}", "stop_sequences"},
      {R"({"model": "m", "max_tokens": 1, "stop_sequences": [""], )" + user + "}",
       "stop_sequences"},
      {R"({"model": "m", "max_tokens": 1, "stop_sequences": ["a","b","c","d","e","f","g","h","i",
          "j","k","l","m","n","o","p","q"], )" +
           user + "}",
       "stop_sequences"},
      {R"({"model": "m", "max_tokens": 1})", "messages"},
      {R"({"model": "m", "max_tokens": 1, "messages": []})", "messages"},
      {R"({"model": "m", "max_tokens": 1, "messages": [{"role": "system", "content": "x"}]})",
       "messages[0].role"},
      {R"({"model": "m", "max_tokens": 1, "messages": [{"role": "user"}]})", "messages[0].content"},
      {R"({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": 5}]})",
       "messages[0].content"},
      {R"({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [
          {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}}]}]})",
       "messages[0].content[0].type"},
      {R"({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [
          {"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]})",
       "messages[0].content[0].type"},
      {R"({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [
          {"type": "text"}]}]})",
       "messages[0].content[0].text"},
      {R"({"model": "m", "max_tokens": 1, "messages": [{"role": "assistant", "content": "x"}]})",
       "messages[0].role"},
      {R"({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "x"},
          {"role": "assistant", "content": "prefill"}]})",
       "messages[1]"},
      {R"({"model": "m", "max_tokens": 1, "system": 5, )" + user + "}", "system"},
      {R"({"model": "m", "max_tokens": 1, "tools": [{"name": "f"}], )" + user + "}",
       "tools[0].input_schema"},
      {R"({"model": "m", "max_tokens": 1, "tools": [{"type": "web_search_20250305",
          "name": "web_search"}], )" +
           user + "}",
       "tools[0].type"},
      {R"({"model": "m", "max_tokens": 1, "tool_choice": {"type": "any"}, )" + user + "}",
       "tool_choice"},
      {R"({"model": "m", "max_tokens": 1, "tool_choice": {"type": "sometimes"}, )" + user + "}",
       "tool_choice.type"},
      {R"({"model": "m", "max_tokens": 1, "thinking": {"type": "enabled", "budget_tokens": 1024},
          )" +
           user + "}",
       "thinking"},
      {R"({"model": "m", "max_tokens": 1, "session_id": "bad id", )" + user + "}", "session_id"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    const ApiError e = refused(c.body);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, c.field) << e.message;
    EXPECT_FALSE(e.message.empty());
  }
}

}  // namespace
}  // namespace tangram::server
