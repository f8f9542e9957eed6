#include "server/openai_response.h"

#include <random>

#include <fmt/format.h>

namespace tangram::server {

using nlohmann::ordered_json;

std::string_view openai_finish_reason(FinishReason r) {
  return r == FinishReason::Length ? "length" : "stop";
}

ordered_json usage_json(const Usage& u) {
  ordered_json j;
  j["prompt_tokens"] = u.prompt_tokens;
  j["completion_tokens"] = u.completion_tokens;
  j["total_tokens"] = u.prompt_tokens + u.completion_tokens;
  j["prompt_tokens_details"] = ordered_json{{"cached_tokens", u.cached_tokens}};
  if (u.dropped_messages > 0) j["dropped_messages"] = u.dropped_messages;
  if (u.repositioned_tokens > 0) j["repositioned_tokens"] = u.repositioned_tokens;
  return j;
}

namespace {

ordered_json head(const ResponseMeta& m, std::string_view object) {
  ordered_json j;
  j["id"] = m.id;
  j["object"] = object;
  j["created"] = m.created;
  j["model"] = m.model;
  j["system_fingerprint"] = "tangram";
  return j;
}

void tail(ordered_json& j, const ResponseMeta& m) {
  if (!m.session_id.empty()) j["session_id"] = m.session_id;
}

}  // namespace

ordered_json chat_completion_json(const ResponseMeta& m, const std::string& content,
                                  FinishReason finish, const Usage& u,
                                  const ordered_json& logprobs) {
  ordered_json j = head(m, "chat.completion");
  ordered_json choice;
  choice["index"] = m.choice;
  choice["message"] =
      ordered_json{{"role", "assistant"}, {"content", content}, {"refusal", nullptr}};
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = openai_finish_reason(finish);
  j["choices"] = ordered_json::array({choice});
  j["usage"] = usage_json(u);
  tail(j, m);
  return j;
}

ordered_json chat_chunk_json(const ResponseMeta& m, std::optional<std::string_view> role,
                             std::optional<std::string_view> content,
                             std::optional<FinishReason> finish, bool with_usage_null,
                             const ordered_json& logprobs) {
  ordered_json j = head(m, "chat.completion.chunk");
  ordered_json delta = ordered_json::object();
  if (role) delta["role"] = *role;
  if (content) delta["content"] = *content;
  ordered_json choice;
  choice["index"] = m.choice;
  choice["delta"] = delta;
  choice["logprobs"] = logprobs;
  choice["finish_reason"] =
      finish ? ordered_json(openai_finish_reason(*finish)) : ordered_json(nullptr);
  j["choices"] = ordered_json::array({choice});
  if (with_usage_null) j["usage"] = nullptr;
  tail(j, m);
  return j;
}

namespace {

ordered_json tool_calls_array(const ParsedReply& reply, bool with_index) {
  ordered_json calls = ordered_json::array();
  for (size_t i = 0; i < reply.calls.size(); ++i) {
    const ParsedToolCall& c = reply.calls[i];
    ordered_json call;
    if (with_index) call["index"] = i;
    call["id"] = c.id.empty() ? random_id("call_") : c.id;
    call["type"] = "function";
    call["function"] = ordered_json{{"name", c.name}, {"arguments", c.arguments}};
    calls.push_back(std::move(call));
  }
  return calls;
}

ordered_json chat_chunk_with(const ResponseMeta& m, ordered_json delta, ordered_json finish,
                             bool with_usage_null) {
  ordered_json j = head(m, "chat.completion.chunk");
  ordered_json choice;
  choice["index"] = m.choice;
  choice["delta"] = std::move(delta);
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = std::move(finish);
  j["choices"] = ordered_json::array({choice});
  if (with_usage_null) j["usage"] = nullptr;
  tail(j, m);
  return j;
}

}  // namespace

ordered_json chat_tool_calls_json(const ResponseMeta& m, const ParsedReply& reply, const Usage& u) {
  ordered_json j = head(m, "chat.completion");
  ordered_json message;
  message["role"] = "assistant";
  message["content"] = reply.content.empty() ? ordered_json(nullptr) : ordered_json(reply.content);
  message["refusal"] = nullptr;
  message["tool_calls"] = tool_calls_array(reply, /*with_index=*/false);
  ordered_json choice;
  choice["index"] = m.choice;
  choice["message"] = std::move(message);
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = "tool_calls";
  j["choices"] = ordered_json::array({choice});
  j["usage"] = usage_json(u);
  tail(j, m);
  return j;
}

std::string chat_tool_call_piece(const ResponseMeta& m, int index, const std::string& id,
                                 const std::string& name, const std::string& arguments,
                                 bool with_usage_null) {
  ordered_json call;
  call["index"] = index;
  ordered_json function;
  if (!id.empty()) {
    call["id"] = id;
    call["type"] = "function";
    function["name"] = name;
  }
  function["arguments"] = arguments;
  call["function"] = std::move(function);
  const ordered_json delta{{"tool_calls", ordered_json::array({std::move(call)})}};
  return sse_event(chat_chunk_with(m, delta, nullptr, with_usage_null));
}

std::string chat_tool_calls_end(const ResponseMeta& m, bool with_usage_null) {
  return sse_event(chat_chunk_with(m, ordered_json::object(), "tool_calls", with_usage_null));
}

ordered_json chat_usage_chunk_json(const ResponseMeta& m, const Usage& u) {
  ordered_json j = head(m, "chat.completion.chunk");
  j["choices"] = ordered_json::array();
  j["usage"] = usage_json(u);
  tail(j, m);
  return j;
}

ordered_json completion_json(const ResponseMeta& m, const std::string& text, FinishReason finish,
                             const Usage& u, const ordered_json& logprobs) {
  ordered_json j = head(m, "text_completion");
  ordered_json choice;
  choice["text"] = text;
  choice["index"] = m.choice;
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = openai_finish_reason(finish);
  j["choices"] = ordered_json::array({choice});
  j["usage"] = usage_json(u);
  tail(j, m);
  return j;
}

ordered_json completion_chunk_json(const ResponseMeta& m, std::string_view text,
                                   std::optional<FinishReason> finish, bool with_usage_null,
                                   const ordered_json& logprobs) {
  ordered_json j = head(m, "text_completion");
  ordered_json choice;
  choice["text"] = text;
  choice["index"] = m.choice;
  choice["logprobs"] = logprobs;
  choice["finish_reason"] =
      finish ? ordered_json(openai_finish_reason(*finish)) : ordered_json(nullptr);
  j["choices"] = ordered_json::array({choice});
  if (with_usage_null) j["usage"] = nullptr;
  tail(j, m);
  return j;
}

ordered_json completion_usage_chunk_json(const ResponseMeta& m, const Usage& u) {
  ordered_json j = head(m, "text_completion");
  j["choices"] = ordered_json::array();
  j["usage"] = usage_json(u);
  tail(j, m);
  return j;
}

std::string dump_json(const ordered_json& j) {
  // A model can emit bytes that are not valid UTF-8 on their own; replace rather than throw.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string sse_event(const ordered_json& j) { return "data: " + dump_json(j) + "\n\n"; }

std::string random_id(std::string_view prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:016x}{:08x}", prefix, rng(), static_cast<uint32_t>(rng()));
}

}  // namespace tangram::server
