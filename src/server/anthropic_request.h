// Anthropic's Messages API request (POST /v1/messages, /v1/messages/count_tokens) read into what
// the chat path already serves: messages in the template's shape, OpenAI-shaped tools, a tool
// choice and the sampling fields. Content blocks become the chat template's messages:
//   text blocks          the message's content
//   tool_use (assistant) tool_calls [{"id", "type": "function", "function": {"name", "arguments"}}]
//   tool_result (user)   a "tool" message with tool_call_id, before the user's own text
// Fields that would change what a client gets back and that are not served (images, documents,
// extended thinking, server tools) are refused; harmless ones (metadata, service_tier) ignored.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace tangram::server {

struct MessagesRequest {
  GenerationFields gen;
  std::vector<ChatMessage> messages;               // the system prompt first, when one was given
  nlohmann::json tools = nlohmann::json::array();  // as chat's: [{"type": "function", ...}]
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;  // false: tool_choice.disable_parallel_tool_use
};

// Stop sequences a request may give (Anthropic documents no limit; each is matched per token).
inline constexpr size_t kMaxStopSequences = 16;

// count_only: /v1/messages/count_tokens, which takes no max_tokens and generates nothing.
std::variant<MessagesRequest, ApiError> parse_messages_request(const std::string& body,
                                                               const RequestDefaults& defaults,
                                                               bool count_only = false);

}  // namespace tangram::server
