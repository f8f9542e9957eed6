#include "server/responses_json.h"

#include <fmt/format.h>

namespace tangram::server {
namespace {

using nlohmann::ordered_json;

ordered_json null_or(const std::string& s) {
  return s.empty() ? ordered_json(nullptr) : ordered_json(s);
}

ordered_json text_part(const std::string& text,
                       const ordered_json& logprobs = ordered_json::array()) {
  return ordered_json{{"type", "output_text"},
                      {"text", text},
                      {"annotations", ordered_json::array()},
                      {"logprobs", logprobs}};
}

ordered_json message_item(const ResponseState& s, bool done) {
  ordered_json m;
  m["id"] = s.message_id;
  m["type"] = "message";
  m["status"] = done ? (s.status == "incomplete" ? "incomplete" : "completed") : "in_progress";
  m["role"] = "assistant";
  m["content"] =
      done ? ordered_json::array({text_part(s.text, s.logprobs)}) : ordered_json::array();
  return m;
}

ordered_json call_item(const ResponseState::Call& c, bool done) {
  ordered_json j;
  j["id"] = c.item_id;
  j["type"] = "function_call";
  j["status"] = done ? "completed" : "in_progress";
  j["arguments"] = done ? c.arguments : "";
  j["call_id"] = c.call_id;
  j["name"] = c.name;
  return j;
}

// The message item is there when there is text or nothing else.
bool has_message(const ResponseState& s) { return !s.text.empty() || s.calls.empty(); }

ordered_json usage_of(const Usage& u) {
  ordered_json j;
  j["input_tokens"] = u.prompt_tokens;
  j["input_tokens_details"] = ordered_json{{"cached_tokens", u.cached_tokens}};
  j["output_tokens"] = u.completion_tokens;
  j["output_tokens_details"] = ordered_json{{"reasoning_tokens", 0}};
  j["total_tokens"] = u.prompt_tokens + u.completion_tokens;
  if (u.dropped_messages > 0) j["dropped_messages"] = u.dropped_messages;
  if (u.repositioned_tokens > 0) j["repositioned_tokens"] = u.repositioned_tokens;
  return j;
}

}  // namespace

void finish_response(ResponseState& s, FinishReason finish, const std::string& text,
                     const Usage& usage, ToolCallSyntax tools) {
  s.status = finish == FinishReason::Length ? "incomplete" : "completed";
  s.usage = usage;
  s.text = text;
  s.calls.clear();
  if (tools == ToolCallSyntax::None) return;
  const ParsedReply reply = parse_tool_calls(tools, text);
  if (reply.calls.empty()) return;
  s.text = text.substr(0, tool_call_start(tools, text).value_or(text.size()));
  for (size_t i = 0; i < reply.calls.size(); ++i) {
    const ParsedToolCall& c = reply.calls[i];
    s.calls.push_back(
        ResponseState::Call{call_item_id(s, i), call_id_of(s, i, c.id), c.name, c.arguments});
  }
}

namespace {
std::string id_suffix(const ResponseState& s) {
  const size_t cut = s.id.find('_');
  return cut == std::string::npos ? s.id : s.id.substr(cut + 1);
}
}  // namespace

std::string call_item_id(const ResponseState& s, size_t i) {
  return fmt::format("fc_{}_{}", id_suffix(s), i);
}

std::string call_id_of(const ResponseState& s, size_t i, const std::string& model_id) {
  return model_id.empty() ? fmt::format("call_{}_{}", id_suffix(s), i) : model_id;
}

void fail_response(ResponseState& s, const ApiError& error) {
  s.status = "failed";
  s.error = error;
}

ordered_json response_json(const ResponseState& s) {
  const bool ended = s.status != "in_progress";
  ordered_json j;
  j["id"] = s.id;
  j["object"] = "response";
  j["created_at"] = s.created_at;
  j["status"] = s.status;
  j["error"] = s.error
                   ? ordered_json{{"code", s.error->code.empty() ? "server_error" : s.error->code},
                                  {"message", s.error->message}}
                   : ordered_json(nullptr);
  j["incomplete_details"] = s.status == "incomplete" ? ordered_json{{"reason", "max_output_tokens"}}
                                                     : ordered_json(nullptr);
  j["instructions"] = null_or(s.instructions);
  j["max_output_tokens"] =
      s.max_output_tokens ? ordered_json(*s.max_output_tokens) : ordered_json(nullptr);
  j["model"] = s.model;
  ordered_json output = ordered_json::array();
  if (ended && s.status != "failed") {
    if (has_message(s)) output.push_back(message_item(s, true));
    for (const ResponseState::Call& c : s.calls) output.push_back(call_item(c, true));
  }
  j["output"] = std::move(output);
  j["parallel_tool_calls"] = true;
  j["previous_response_id"] = null_or(s.previous_response_id);
  j["reasoning"] = ordered_json{{"effort", nullptr}, {"summary", nullptr}};
  j["store"] = s.store;
  j["temperature"] = s.temperature;
  j["text"] = ordered_json{{"format", s.text_format}};
  j["tool_choice"] = "auto";
  j["tools"] = ordered_json::array();
  j["top_logprobs"] = s.top_logprobs;
  j["top_p"] = s.top_p;
  j["truncation"] = s.truncation;
  j["usage"] = ended && s.status != "failed" ? usage_of(s.usage) : ordered_json(nullptr);
  j["user"] = nullptr;
  j["metadata"] = s.metadata;
  if (!s.session_id.empty()) j["session_id"] = s.session_id;
  return j;
}

std::string ResponseEvents::event(ordered_json body) {
  body["sequence_number"] = sequence_++;
  return "event: " + body["type"].get<std::string>() + "\n" + sse_event(body);
}

std::string ResponseEvents::opening() {
  const ordered_json r = response_json(initial_);
  std::string out = event(ordered_json{{"type", "response.created"}, {"response", r}});
  out += event(ordered_json{{"type", "response.in_progress"}, {"response", r}});
  return out;
}

std::string ResponseEvents::open_message() {
  message_open_ = true;
  std::string out = event(ordered_json{{"type", "response.output_item.added"},
                                       {"output_index", 0},
                                       {"item", message_item(initial_, false)}});
  out += event(ordered_json{{"type", "response.content_part.added"},
                            {"item_id", initial_.message_id},
                            {"output_index", 0},
                            {"content_index", 0},
                            {"part", text_part("")}});
  return out;
}

std::string ResponseEvents::text_delta(std::string_view delta, const ordered_json& logprobs) {
  if (message_done_) return {};  // text after a call: the final response has it
  std::string out = message_open_ ? std::string() : open_message();
  sent_text_.append(delta);
  for (const auto& e : logprobs) sent_logprobs_.push_back(e);
  out += event(ordered_json{{"type", "response.output_text.delta"},
                            {"item_id", initial_.message_id},
                            {"output_index", 0},
                            {"content_index", 0},
                            {"delta", delta},
                            {"logprobs", logprobs}});
  return out;
}

std::string ResponseEvents::message_done(const ResponseState& done) {
  message_done_ = true;
  const std::string& text = done.text;
  const ordered_json& logprobs = done.logprobs;
  std::string out = event(ordered_json{{"type", "response.output_text.done"},
                                       {"item_id", initial_.message_id},
                                       {"output_index", 0},
                                       {"content_index", 0},
                                       {"text", text},
                                       {"logprobs", logprobs}});
  out += event(ordered_json{{"type", "response.content_part.done"},
                            {"item_id", initial_.message_id},
                            {"output_index", 0},
                            {"content_index", 0},
                            {"part", text_part(text, logprobs)}});
  out += event(ordered_json{{"type", "response.output_item.done"},
                            {"output_index", 0},
                            {"item", message_item(done, true)}});
  return out;
}

int64_t ResponseEvents::call_output_index(size_t call) const {
  return static_cast<int64_t>(call) + (message_open_ ? 1 : 0);
}

std::string ResponseEvents::call_opened(const ResponseState::Call& call) {
  std::string out;
  if (message_open_ && !message_done_) {
    ResponseState done = initial_;
    done.text = sent_text_;
    done.logprobs = sent_logprobs_;
    done.status = "completed";
    out = message_done(done);
  }
  message_done_ = true;  // no message opens after a call
  opened_.push_back(call);
  arguments_sent_.push_back(false);
  out += event(ordered_json{{"type", "response.output_item.added"},
                            {"output_index", call_output_index(opened_.size() - 1)},
                            {"item", call_item(call, false)}});
  return out;
}

std::string ResponseEvents::call_arguments(int call, const std::string& delta) {
  const auto i = static_cast<size_t>(call);
  if (i >= opened_.size() || delta.empty()) return {};
  arguments_sent_[i] = true;
  return event(ordered_json{{"type", "response.function_call_arguments.delta"},
                            {"item_id", opened_[i].item_id},
                            {"output_index", call_output_index(i)},
                            {"delta", delta}});
}

std::string ResponseEvents::closing(const ResponseState& s) {
  if (s.status == "failed")
    return event(ordered_json{{"type", "response.failed"}, {"response", response_json(s)}});
  std::string out;
  if (has_message(s) && !message_done_) {
    if (!message_open_) out += open_message();
    out += message_done(s);
  }
  const int64_t first = has_message(s) ? 1 : 0;
  for (size_t i = 0; i < s.calls.size(); ++i) {
    const ResponseState::Call& c = s.calls[i];
    const int64_t index = first + static_cast<int64_t>(i);
    const bool opened = i < opened_.size();
    if (!opened)
      out += event(ordered_json{{"type", "response.output_item.added"},
                                {"output_index", index},
                                {"item", call_item(c, false)}});
    if (!opened || !arguments_sent_[i])
      out += event(ordered_json{{"type", "response.function_call_arguments.delta"},
                                {"item_id", c.item_id},
                                {"output_index", index},
                                {"delta", c.arguments}});
    out += event(ordered_json{{"type", "response.function_call_arguments.done"},
                              {"item_id", c.item_id},
                              {"output_index", index},
                              {"name", c.name},
                              {"arguments", c.arguments}});
    out += event(ordered_json{{"type", "response.output_item.done"},
                              {"output_index", index},
                              {"item", call_item(c, true)}});
  }
  const char* last = s.status == "incomplete" ? "response.incomplete" : "response.completed";
  out += event(ordered_json{{"type", last}, {"response", response_json(s)}});
  return out;
}

}  // namespace tangram::server
