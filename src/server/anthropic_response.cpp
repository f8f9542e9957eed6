#include "server/anthropic_response.h"

#include "common/json_parse.h"

namespace tangram::server {

using nlohmann::ordered_json;

std::string_view anthropic_error_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

ordered_json anthropic_error_json(const ApiError& e) {
  return {{"type", "error"},
          {"error", {{"type", anthropic_error_type(e.status)}, {"message", e.message}}}};
}

std::string anthropic_event(const ordered_json& body) {
  return "event: " + body.value("type", std::string("message")) + "\ndata: " + dump_json(body) +
         "\n\n";
}

ordered_json anthropic_usage_json(const Usage& u) {
  ordered_json j = {{"input_tokens", u.prompt_tokens - u.cached_tokens},
                    {"cache_creation_input_tokens", 0},
                    {"cache_read_input_tokens", u.cached_tokens},
                    {"output_tokens", u.completion_tokens}};
  if (u.dropped_messages > 0) j["dropped_messages"] = u.dropped_messages;
  if (u.repositioned_tokens > 0) j["repositioned_tokens"] = u.repositioned_tokens;
  return j;
}

MessageStop message_stop(const RequestResult& r, const std::vector<std::string>& stop_sequences,
                         bool called_tools) {
  if (called_tools) return {"tool_use", nullptr};
  if (r.finish == FinishReason::Length) return {"max_tokens", nullptr};
  if (r.stop_index >= 0 && static_cast<size_t>(r.stop_index) < stop_sequences.size())
    return {"stop_sequence", stop_sequences[static_cast<size_t>(r.stop_index)]};
  return {"end_turn", nullptr};
}

ordered_json message_content(const ParsedReply& reply) {
  ordered_json content = ordered_json::array();
  if (!reply.content.empty()) content.push_back({{"type", "text"}, {"text", reply.content}});
  for (const ParsedToolCall& c : reply.calls) {
    // The parsers hand back an object's text; anything else (never expected) becomes {}.
    auto input = parse_ordered_json(c.arguments);
    content.push_back({{"type", "tool_use"},
                       {"id", c.id.empty() ? random_id("toolu_") : c.id},
                       {"name", c.name},
                       {"input", input && input->is_object() ? std::move(input).value()
                                                             : ordered_json::object()}});
  }
  return content;
}

ordered_json message_json(const MessageMeta& m, const RequestResult& r,
                          const std::vector<std::string>& stop_sequences, ToolCallSyntax tools,
                          const Usage& u) {
  ParsedReply reply =
      tools == ToolCallSyntax::None ? ParsedReply{} : parse_tool_calls(tools, r.text);
  if (reply.calls.empty()) reply.content = r.text;  // untrimmed, as it was generated
  const MessageStop stop = message_stop(r, stop_sequences, !reply.calls.empty());
  return {{"id", m.id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", m.model},
          {"content", message_content(reply)},
          {"stop_reason", stop.reason},
          {"stop_sequence", stop.sequence},
          {"usage", anthropic_usage_json(u)}};
}

}  // namespace tangram::server
