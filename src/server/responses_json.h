// OpenAI Responses API bodies: the response object (POST /v1/responses, GET /v1/responses/{id})
// and its stream of typed Server-Sent Events, in OpenAI's field order so its client libraries
// parse them unchanged.
//
// Output: a message item (when there is text, or no call), then one function_call item per tool
// call. A streamed response is: response.created, response.in_progress; for the message
// response.output_item.added, response.content_part.added, response.output_text.delta (one per
// piece of text), response.output_text.done, response.content_part.done,
// response.output_item.done; for each call response.output_item.added,
// response.function_call_arguments.delta (one per piece of its arguments as they are generated;
// the message item is done before the first call's is added) and .done, response.output_item.done;
// then
// response.completed (or response.incomplete when max_output_tokens cut it, response.failed on
// an error). Each event is "event: <type>\ndata: <json with type and sequence_number>\n\n".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/tool_calls.h"
#include "runtime/finish_reason.h"
#include "server/api_error.h"
#include "server/openai_response.h"

namespace tangram::server {

// Everything a response object shows, from creation to its end.
struct ResponseState {
  std::string id;          // "resp_..."
  std::string message_id;  // "msg_...": the one output message
  int64_t created_at = 0;  // Unix seconds
  std::string model;
  std::string status = "in_progress";  // in_progress, completed, incomplete, failed
  std::string instructions;            // "" = null
  std::string previous_response_id;    // "" = null
  std::optional<int64_t> max_output_tokens;
  float temperature = 1.0f;
  float top_p = 1.0f;
  bool store = true;
  std::string truncation = "disabled";  // "auto": the oldest turns may be left out to fit
  nlohmann::json metadata = nlohmann::json::object();
  nlohmann::json text_format = {{"type", "text"}};  // text.format as asked for
  std::string session_id;  // Tangram extension: the conversation whose KV this chain reuses
  std::string text;        // the output text so far (with calls: the text before the first)
  struct Call {
    std::string item_id;  // "fc_..."
    std::string call_id;  // "call_...": what function_call_output names
    std::string name;
    std::string arguments;  // JSON text
  };
  std::vector<Call> calls;
  int top_logprobs = 0;  // as asked for (echoed)
  // With logprobs asked for: the output_text part's "logprobs" (chat's logprobs.content entries).
  nlohmann::ordered_json logprobs = nlohmann::ordered_json::array();
  Usage usage;
  std::optional<ApiError> error;  // status failed
};

// The state once the generation ended: status, incomplete_details' reason, text and usage; with
// a tool-call syntax (tools were given), the calls in the text and the text before them.
void finish_response(ResponseState& s, FinishReason finish, const std::string& text,
                     const Usage& usage, ToolCallSyntax tools = ToolCallSyntax::None);
void fail_response(ResponseState& s, const ApiError& error);

nlohmann::ordered_json response_json(const ResponseState& s);

// The typed events of one streamed response, numbered in order.
// The ids of call i of a response: its item's ("fc_...") and, unless the model wrote its own, the
// call's ("call_..."). Derived from the response's id, so that a streamed call, the stored
// response and a later GET name a call alike.
std::string call_item_id(const ResponseState& s, size_t i);
std::string call_id_of(const ResponseState& s, size_t i, const std::string& model_id);

class ResponseEvents {
 public:
  explicit ResponseEvents(const ResponseState& initial) : initial_(initial) {}
  // response.created, response.in_progress.
  std::string opening();
  // A piece of the message's text and its tokens' logprobs entries (the message item opens
  // before the first).
  std::string text_delta(std::string_view delta,
                         const nlohmann::ordered_json& logprobs = nlohmann::ordered_json::array());
  // A call's item opens while it is generated (its name is known; the message, if any, is done
  // first, with the text sent so far); then pieces of its arguments.
  std::string call_opened(const ResponseState::Call& call);
  std::string call_arguments(int call, const std::string& delta);
  // The closing events for the finished state (the message's done events, each call's item,
  // completed or incomplete), or response.failed for a failed one. Calls opened while streaming
  // must come first in final_state.calls, under the same ids.
  std::string closing(const ResponseState& final_state);

 private:
  std::string event(nlohmann::ordered_json body);
  std::string open_message();
  // The message's done events, for its text, entries and status in `done`.
  std::string message_done(const ResponseState& done);
  int64_t call_output_index(size_t call) const;
  ResponseState initial_;
  int64_t sequence_ = 0;
  bool message_open_ = false;
  bool message_done_ = false;
  std::string sent_text_;  // the message's text so far
  nlohmann::ordered_json sent_logprobs_ = nlohmann::ordered_json::array();  // and its entries
  std::vector<ResponseState::Call> opened_;  // calls opened while streaming
  std::vector<bool> arguments_sent_;         // per opened call: a piece of arguments went out
};

}  // namespace tangram::server
