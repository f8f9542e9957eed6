// Anthropic Messages API responses: the message object, the streamed event sequence
// (message_start, content_block_start / _delta / _stop per block, message_delta, message_stop)
// and errors ({"type": "error", "error": {"type", "message"}}), shaped as Anthropic's API sends
// them so its client libraries parse them unchanged.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/tool_calls.h"
#include "scheduler/request.h"
#include "server/api_error.h"
#include "server/openai_response.h"

namespace tangram::server {

// The fields every event of one message shares.
struct MessageMeta {
  std::string id;  // "msg_..."
  std::string model;
  int64_t prompt_tokens = 0;  // known when the stream opens (its cached part only at the end)
};

// Anthropic's error type for an HTTP status (400 invalid_request_error, 401
// authentication_error, 404 not_found_error, 429 rate_limit_error, 500 api_error, ...).
std::string_view anthropic_error_type(int status);
nlohmann::ordered_json anthropic_error_json(const ApiError& e);

// One event of a stream: "event: <type>\ndata: <json>\n\n".
std::string anthropic_event(const nlohmann::ordered_json& body);

// usage: input_tokens are the prompt tokens computed afresh, cache_read_input_tokens those whose
// KV a previous turn left (Anthropic counts the two apart; their sum is the prompt).
nlohmann::ordered_json anthropic_usage_json(const Usage& u);

// stop_reason: "end_turn", "max_tokens", "stop_sequence" or "tool_use"; stop_sequence: the one
// that matched (null otherwise).
struct MessageStop {
  std::string reason;
  nlohmann::ordered_json sequence;
};
MessageStop message_stop(const RequestResult& r, const std::vector<std::string>& stop_sequences,
                         bool called_tools);

// The content blocks of a finished reply: its text (when there is any), then a tool_use block per
// call (ids "toolu_..." unless the model wrote its own).
nlohmann::ordered_json message_content(const ParsedReply& reply);

// The whole message of a non-streamed answer.
nlohmann::ordered_json message_json(const MessageMeta& m, const RequestResult& r,
                                    const std::vector<std::string>& stop_sequences,
                                    ToolCallSyntax tools, const Usage& u);

}  // namespace tangram::server
