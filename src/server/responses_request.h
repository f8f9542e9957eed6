// Parsing and validation of OpenAI Responses API bodies (POST /v1/responses) into what the
// engine needs, like openai_request.h does for chat completions.
//
// A turn is `input` (a string, or message items whose content is text, function_call items the
// model made and function_call_output items with their results) after the stored history
// of `previous_response_id`, with `instructions` as the system message of this turn only (as
// OpenAI does: instructions are not carried along a chain). Fields that would change what a
// client gets back and that Tangram does not implement (built-in tools, reasoning, include,
// background runs, stored prompts, server-side conversations, truncation "auto")
// are refused rather than silently ignored; harmless ones (user, service_tier, prompt_cache_key)
// are ignored.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace tangram::server {

struct ResponsesRequest {
  GenerationFields gen;  // max_output_tokens is gen.params.max_tokens (0: up to the context)
  std::optional<int64_t> max_output_tokens;  // as sent, for the response object
  std::string instructions;                  // "" = none
  std::vector<ChatMessage> input;            // this turn's messages, in order
  std::string previous_response_id;          // "" = a new chain
  bool store = true;                         // keep the response for GET and previous_response_id
  nlohmann::json metadata = nlohmann::json::object();  // echoed back: up to 16 string values
  // Function tools in the chat form the templates take; empty when none or tool_choice "none".
  nlohmann::json tools = nlohmann::json::array();
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;
  nlohmann::json text_format;  // text.format as sent when it is JSON (echoed in the response)
  int top_logprobs = 0;        // as sent (0-20); gen.top_logprobs >= 0 when logprobs are reported
  // "auto": a chain longer than the context drops its oldest turns; "disabled" (OpenAI's
  // default): it is refused.
  bool truncate = false;
};

// The one `include` value this server knows: log-probabilities on output_text parts.
inline constexpr const char* kIncludeLogprobs = "message.output_text.logprobs";

std::variant<ResponsesRequest, ApiError> parse_responses_request(const std::string& body,
                                                                 const RequestDefaults& defaults);

// A response id this server could have issued: "resp_" then 1 to 64 of [A-Za-z0-9].
bool valid_response_id(const std::string& id);

}  // namespace tangram::server
