// The Responses API request parser: inputs map onto chat messages, unsupported features are
// refused with the field named, and malformed bodies get a 400, never an exception.
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "server/responses_request.h"

namespace tangram::server {
namespace {

RequestDefaults defaults() {
  RequestDefaults d;
  d.params.temperature = 0.7f;
  d.params.top_p = 1.0f;
  d.vocab_size = 512;
  return d;
}

ResponsesRequest ok(const std::string& body) {
  auto r = parse_responses_request(body, defaults());
  EXPECT_TRUE(std::holds_alternative<ResponsesRequest>(r)) << std::get<ApiError>(r).message;
  return std::holds_alternative<ResponsesRequest>(r) ? std::get<ResponsesRequest>(r)
                                                     : ResponsesRequest{};
}

ApiError refused(const std::string& body) {
  auto r = parse_responses_request(body, defaults());
  EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << "accepted: " << body;
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

TEST(ResponsesRequest, StringInputIsOneUserMessage) {
  const ResponsesRequest r = ok(R"({"model": "m", "input": "hi", "instructions": "be brief",
      "max_output_tokens": 9, "temperature": 0, "top_p": 0.5, "stream": true, "store": false,
      "metadata": {"k": "v"}, "user": "ignored", "parallel_tool_calls": true, "tool_choice": "auto"})");
  ASSERT_EQ(r.input.size(), 1u);
  EXPECT_EQ(r.input[0].role, "user");
  EXPECT_EQ(r.input[0].content, "hi");
  EXPECT_EQ(r.instructions, "be brief");
  EXPECT_EQ(r.gen.params.max_tokens, 9);
  ASSERT_TRUE(r.max_output_tokens.has_value());
  EXPECT_EQ(*r.max_output_tokens, 9);
  EXPECT_EQ(r.gen.params.temperature, 0.0f);
  EXPECT_EQ(r.gen.params.top_p, 0.5f);
  EXPECT_TRUE(r.gen.stream);
  EXPECT_FALSE(r.store);
  EXPECT_EQ(r.metadata["k"], "v");
}

TEST(ResponsesRequest, DefaultsComeFromTheServer) {
  const ResponsesRequest r = ok(R"({"input": "hi"})");
  EXPECT_EQ(r.gen.params.temperature, 0.7f);
  EXPECT_EQ(r.gen.params.max_tokens, 0);
  EXPECT_FALSE(r.max_output_tokens.has_value());
  EXPECT_TRUE(r.store);
  EXPECT_TRUE(r.previous_response_id.empty());
}

TEST(ResponsesRequest, MessageItemsWithTextParts) {
  const ResponsesRequest r = ok(R"({"input": [
      {"role": "developer", "content": "rules"},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
      {"role": "assistant", "content": [{"type": "output_text", "text": "c", "annotations": []}]},
      {"role": "user", "content": "d"}]})");
  ASSERT_EQ(r.input.size(), 4u);
  EXPECT_EQ(r.input[0].role, "system");
  EXPECT_EQ(r.input[1].content, "ab");
  EXPECT_EQ(r.input[2].role, "assistant");
  EXPECT_EQ(r.input[2].content, "c");
  EXPECT_EQ(r.input[3].content, "d");
}

TEST(ResponsesRequest, ChainedTurnMayHoldNoUserMessage) {
  const ResponsesRequest r = ok(
      R"({"previous_response_id": "resp_abc123", "input": [{"role": "system", "content": "x"}]})");
  EXPECT_EQ(r.previous_response_id, "resp_abc123");
  EXPECT_EQ(refused(R"({"input": [{"role": "system", "content": "x"}]})").code, "empty_input");
}

TEST(ResponsesRequest, UnsupportedFeaturesAreRefusedByName) {
  EXPECT_EQ(refused(R"({"input": "hi", "tools": [{"type": "web_search"}]})").param,
            "tools[0].type");
  EXPECT_EQ(refused(R"({"input": "hi", "tools": [{"type": "function"}]})").param, "tools[0].name");
  EXPECT_EQ(refused(R"({"input": "hi", "tool_choice": "required"})").param, "tool_choice");
  EXPECT_EQ(refused(R"({"input": "hi", "include": ["reasoning.encrypted_content"]})").param,
            "include");
  EXPECT_EQ(refused(R"({"input": "hi", "reasoning": {"effort": "high"}})").param, "reasoning");
  EXPECT_EQ(refused(R"({"input": "hi", "top_logprobs": 21})").param, "top_logprobs");
  EXPECT_EQ(refused(R"({"input": "hi", "include": "message.output_text.logprobs"})").param,
            "include");
  EXPECT_EQ(refused(R"({"input": "hi", "background": true})").param, "background");
  EXPECT_EQ(refused(R"({"input": "hi", "truncation": "sometimes"})").param, "truncation");
  EXPECT_EQ(refused(R"({"input": "hi", "truncation": true})").param, "truncation");
  EXPECT_EQ(refused(R"({"input": "hi", "conversation": "conv_1"})").param, "conversation");
  EXPECT_EQ(refused(R"({"input": "hi", "prompt": {"id": "p"}})").param, "prompt");
  EXPECT_EQ(refused(R"({"input": "hi", "text": {"format": {"type": "yaml"}}})").param,
            "text.format.type");
  EXPECT_EQ(refused(R"({"input": [{"type": "reasoning", "summary": []}]})").param, "input[0].type");
  EXPECT_EQ(
      refused(
          R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]})")
          .code,
      "unsupported_value");
  // Structured output and forced calls (compiled against the template by the server).
  const ResponsesRequest json_format =
      ok(R"({"input": "hi", "text": {"format": {"type": "json_schema", "name": "p",
      "schema": {"type": "object"}, "strict": true}}})");
  ASSERT_TRUE(json_format.gen.format.has_value());
  EXPECT_EQ(json_format.gen.format->name, "p");
  EXPECT_TRUE(json_format.gen.format->strict);
  EXPECT_EQ(json_format.text_format["type"], "json_schema");
  const ResponsesRequest named = ok(R"({"input": "hi", "tools": [{"type": "function", "name": "f"}],
      "tool_choice": {"type": "function", "name": "f"}, "parallel_tool_calls": false})");
  EXPECT_EQ(named.tool_choice.mode, ToolChoice::Mode::Named);
  EXPECT_EQ(named.tool_choice.name, "f");
  EXPECT_FALSE(named.parallel_tool_calls);
  // What the server does anyway is accepted.
  EXPECT_FALSE(ok(R"({"input": "hi", "tools": [], "tool_choice": "none", "include": [],
         "reasoning": null, "truncation": "disabled", "background": false,
         "text": {"format": {"type": "text"}}})")
                   .truncate);
  EXPECT_TRUE(ok(R"({"input": "hi", "truncation": "auto"})").truncate);
}

TEST(ResponsesRequest, LogprobsByIncludeOrTopLogprobs) {
  EXPECT_EQ(ok(R"({"input": "hi"})").gen.top_logprobs, -1);
  EXPECT_EQ(ok(R"({"input": "hi", "top_logprobs": 0})").gen.top_logprobs, -1);
  const ResponsesRequest included =
      ok(R"({"input": "hi", "include": ["message.output_text.logprobs"]})");
  EXPECT_EQ(included.gen.top_logprobs, 0);
  const ResponsesRequest both =
      ok(R"({"input": "hi", "include": ["message.output_text.logprobs"], "top_logprobs": 5})");
  EXPECT_EQ(both.gen.top_logprobs, 5);
  EXPECT_EQ(both.top_logprobs, 5);
  EXPECT_EQ(ok(R"({"input": "hi", "top_logprobs": 20})").gen.top_logprobs, 20);
}

TEST(ResponsesRequest, FunctionToolsAndCallItems) {
  const ResponsesRequest r =
      ok(R"({"tools": [{"type": "function", "name": "get_weather", "description": "d",
      "parameters": {"type": "object"}}], "tool_choice": "auto",
      "input": [{"role": "user", "content": "weather?"},
                {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"},
                {"type": "function_call", "call_id": "call_2", "name": "get_weather", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}]})");
  ASSERT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(r.tools[0]["type"], "function");
  EXPECT_EQ(r.tools[0]["function"]["name"], "get_weather");  // the chat form the templates take
  EXPECT_EQ(r.tools[0]["function"]["parameters"]["type"], "object");
  ASSERT_EQ(r.input.size(), 3u);
  EXPECT_EQ(r.input[1].role, "assistant");
  ASSERT_TRUE(r.input[1].tool_calls.has_value());
  ASSERT_EQ(r.input[1].tool_calls->size(), 2u);  // parallel calls: one message
  EXPECT_EQ((*r.input[1].tool_calls)[0]["function"]["arguments"]["city"], "Oslo");
  EXPECT_EQ(r.input[2].role, "tool");
  EXPECT_EQ(r.input[2].tool_call_id, "call_1");
  EXPECT_EQ(r.input[2].content, "sunny");
  // A tool result is something to answer: no user message needed.
  ok(R"({"previous_response_id": "resp_1", "input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]})");
  EXPECT_TRUE(
      ok(R"({"input": "hi", "tools": [{"type": "function", "name": "f"}], "tool_choice": "none"})")
          .tools.empty());
  EXPECT_EQ(
      refused(
          R"({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "[1]"}]})")
          .param,
      "input[0].arguments");
  EXPECT_EQ(refused(R"({"input": [{"type": "function_call_output", "output": "x"}]})").param,
            "input[0].call_id");
}

TEST(ResponsesRequest, MalformedBodiesGetTheFieldNamed) {
  EXPECT_EQ(refused("").code, "invalid_json");
  EXPECT_EQ(refused("[1]").code, "invalid_json");
  EXPECT_EQ(refused("{}").param, "input");
  EXPECT_EQ(refused(R"({"input": 3})").param, "input");
  EXPECT_EQ(refused(R"({"input": []})").code, "empty_input");
  EXPECT_EQ(refused(R"({"input": [{"content": "x"}]})").param, "input[0].role");
  EXPECT_EQ(refused(R"({"input": [{"role": "tool", "content": "x"}]})").param, "input[0].role");
  EXPECT_EQ(refused(R"({"input": [{"role": "user"}]})").param, "input[0].content");
  EXPECT_EQ(refused(R"({"input": "hi", "max_output_tokens": 0})").param, "max_output_tokens");
  EXPECT_EQ(refused(R"({"input": "hi", "temperature": 3})").param, "temperature");
  EXPECT_EQ(refused(R"({"input": "hi", "store": "yes"})").param, "store");
  EXPECT_EQ(refused(R"({"input": "hi", "metadata": {"k": 1}})").param, "metadata");
  EXPECT_EQ(refused(R"({"input": "hi", "previous_response_id": "../etc"})").status, 404);
  EXPECT_EQ(refused(R"({"input": "hi", "session_id": "a b"})").param, "session_id");
}

TEST(ResponsesRequest, ResponseIds) {
  EXPECT_TRUE(valid_response_id("resp_0123abcDEF"));
  EXPECT_FALSE(valid_response_id("resp_"));
  EXPECT_FALSE(valid_response_id("chatcmpl-1"));
  EXPECT_FALSE(valid_response_id("resp_a-b"));
  EXPECT_FALSE(valid_response_id("resp_" + std::string(65, 'a')));
}

}  // namespace
}  // namespace tangram::server
