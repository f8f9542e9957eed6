// Response bodies and SSE framing, in the shape OpenAI's API sends.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/openai_response.h"

namespace tangram::server {
namespace {

ResponseMeta meta() { return ResponseMeta{"chatcmpl-1", 1700000000, "m", "conv-1"}; }

TEST(OpenAiResponse, ChatCompletionShape) {
  const auto j = chat_completion_json(meta(), "hello", FinishReason::Length, Usage{10, 3, 4});
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "hello");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["total_tokens"], 13);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
  EXPECT_EQ(j["session_id"], "conv-1");
}

TEST(OpenAiResponse, StreamChunksFollowOpenAiOrder) {
  const auto first = chat_chunk_json(meta(), "assistant", "", std::nullopt, true);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(first.contains("usage") && first["usage"].is_null());
  const auto last = chat_chunk_json(meta(), std::nullopt, std::nullopt, FinishReason::Stop, false);
  EXPECT_TRUE(last["choices"][0]["delta"].empty());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(last.contains("usage"));
  const auto usage = chat_usage_chunk_json(meta(), Usage{5, 2, 0});
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 2);
}

TEST(OpenAiResponse, SseFramingAndInvalidUtf8) {
  const std::string e = sse_event(chat_chunk_json(meta(), std::nullopt, std::string_view("a\xff"), std::nullopt, false));
  EXPECT_EQ(e.rfind("data: {", 0), 0u);
  EXPECT_EQ(e.substr(e.size() - 2), "\n\n");
  EXPECT_EQ(e.find('\n'), e.size() - 2);  // one line: JSON never carries a raw newline
  EXPECT_NE(e.find("a\xef\xbf\xbd"), std::string::npos);  // U+FFFD in place of the bad byte
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

TEST(OpenAiResponse, ErrorObject) {
  const auto j = error_json(bad_request("bad", "temperature", "out_of_range"));
  EXPECT_EQ(j["error"]["message"], "bad");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_EQ(j["error"]["code"], "out_of_range");
  const auto none = error_json(ApiError{500, "x", "server_error", "", "", 0});
  EXPECT_TRUE(none["error"]["param"].is_null());
  EXPECT_TRUE(none["error"]["code"].is_null());
}

TEST(OpenAiResponse, RandomIdsDiffer) {
  const std::string a = random_id("chatcmpl-"), b = random_id("chatcmpl-");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.size(), 9u + 24u);
}

}  // namespace
}  // namespace tangram::server
