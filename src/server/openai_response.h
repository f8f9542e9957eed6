// OpenAI response bodies and Server-Sent Events framing, byte-compatible with what OpenAI's API
// sends (field order included), so its client libraries parse them unchanged.
//
// A streamed chat completion is: one chunk whose delta is {"role": "assistant", "content": ""},
// content chunks, a chunk with an empty delta and the finish_reason, then (with
// stream_options.include_usage) a chunk with no choices and the usage, then "data: [DONE]".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/tool_calls.h"
#include "runtime/finish_reason.h"

namespace tangram::server {

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens whose KV was reused
  // Tangram extension: the oldest messages left out so that the conversation fits the context
  // (0: none; then the field is absent from the JSON).
  int64_t dropped_messages = 0;
  // Tangram extension: of cached_tokens, those whose KV was kept at new positions after the
  // dropped messages (--context-overflow shift; 0: absent from the JSON).
  int64_t repositioned_tokens = 0;
};

// The fields every response of one request shares.
struct ResponseMeta {
  std::string id;       // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
  std::string session_id;  // Tangram extension: the conversation this turn belongs to
  int choice = 0;          // the choice's "index" (n > 1)
};

// OpenAI's finish_reason for an engine outcome ("stop" or "length").
std::string_view openai_finish_reason(FinishReason r);

nlohmann::ordered_json usage_json(const Usage& u);

// logprobs: the choice's "logprobs" (null: not asked for), in every function below.
nlohmann::ordered_json chat_completion_json(const ResponseMeta& m, const std::string& content,
                                            FinishReason finish, const Usage& u,
                                            const nlohmann::ordered_json& logprobs = nullptr);
// A chat.completion.chunk. role: the first chunk; content: a content delta; finish: the last
// choice chunk. with_usage_null: include_usage streams carry "usage": null on every choice chunk.
nlohmann::ordered_json chat_chunk_json(const ResponseMeta& m, std::optional<std::string_view> role,
                                       std::optional<std::string_view> content,
                                       std::optional<FinishReason> finish, bool with_usage_null,
                                       const nlohmann::ordered_json& logprobs = nullptr);
// A reply that called tools: the message's tool_calls (content null when there is none) and
// finish_reason "tool_calls". Calls without the model's own id get "call_" + random hex.
nlohmann::ordered_json chat_tool_calls_json(const ResponseMeta& m, const ParsedReply& reply,
                                            const Usage& u);
// One piece of a streamed call: a chunk whose delta's tool_calls holds the call's index, and on
// its first piece (id not empty) its id, type and name; arguments: more of its arguments' text.
std::string chat_tool_call_piece(const ResponseMeta& m, int index, const std::string& id,
                                 const std::string& name, const std::string& arguments,
                                 bool with_usage_null);
// The chunk that ends a reply of calls: finish_reason "tool_calls".
std::string chat_tool_calls_end(const ResponseMeta& m, bool with_usage_null);
nlohmann::ordered_json chat_usage_chunk_json(const ResponseMeta& m, const Usage& u);

nlohmann::ordered_json completion_json(const ResponseMeta& m, const std::string& text,
                                       FinishReason finish, const Usage& u,
                                       const nlohmann::ordered_json& logprobs = nullptr);
nlohmann::ordered_json completion_chunk_json(const ResponseMeta& m, std::string_view text,
                                             std::optional<FinishReason> finish,
                                             bool with_usage_null,
                                             const nlohmann::ordered_json& logprobs = nullptr);
nlohmann::ordered_json completion_usage_chunk_json(const ResponseMeta& m, const Usage& u);

// "data: <json>\n\n". Invalid UTF-8 in strings is replaced (U+FFFD), never thrown on.
std::string sse_event(const nlohmann::ordered_json& j);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// JSON text of j with invalid UTF-8 replaced by U+FFFD.
std::string dump_json(const nlohmann::ordered_json& j);

// A random id with a prefix: "chatcmpl-" + 24 hex digits.
std::string random_id(std::string_view prefix);

}  // namespace tangram::server
