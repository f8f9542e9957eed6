#include "server/ollama_response.h"

#include <chrono>
#include <cmath>
#include <ctime>

#include <fmt/format.h>

#include "common/json_parse.h"

namespace tangram::server {

using nlohmann::ordered_json;

std::string rfc3339_utc(int64_t unix_ns) {
  const int64_t seconds =
      unix_ns >= 0 ? unix_ns / 1'000'000'000 : (unix_ns + 1) / 1'000'000'000 - 1;
  const int64_t nanos = unix_ns - seconds * 1'000'000'000;
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, nanos);
}

std::string rfc3339_now() {
  return rfc3339_utc(std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count());
}

std::string ndjson_line(const ordered_json& j) { return dump_json(j) + "\n"; }

namespace {

ordered_json head(const OllamaMeta& m) {
  return {{"model", m.model}, {"created_at", rfc3339_now()}};
}

void put_text(ordered_json& j, const OllamaMeta& m, std::string_view text) {
  if (m.kind == OllamaKind::Chat)
    j["message"] = {{"role", "assistant"}, {"content", text}};
  else
    j["response"] = text;
}

int64_t nanoseconds(double seconds) { return std::llround(std::max(seconds, 0.0) * 1e9); }

}  // namespace

ordered_json ollama_chunk(const OllamaMeta& m, std::string_view text) {
  ordered_json j = head(m);
  put_text(j, m, text);
  j["done"] = false;
  return j;
}

ordered_json ollama_tool_calls(const ParsedReply& reply) {
  ordered_json calls = ordered_json::array();
  for (const ParsedToolCall& c : reply.calls) {
    auto args = parse_ordered_json(c.arguments);
    calls.push_back({{"function",
                      {{"name", c.name},
                       {"arguments", args && args->is_object() ? std::move(args).value()
                                                               : ordered_json::object()}}}});
  }
  return calls;
}

ordered_json ollama_calls_chunk(const OllamaMeta& m, const ParsedReply& reply) {
  ordered_json j = head(m);
  j["message"] = {
      {"role", "assistant"}, {"content", reply.content}, {"tool_calls", ollama_tool_calls(reply)}};
  j["done"] = false;
  return j;
}

ordered_json ollama_final(const OllamaMeta& m, const RequestResult& r, const Usage& u,
                          std::string_view text) {
  ordered_json j = head(m);
  put_text(j, m, text);
  j["done"] = true;
  j["done_reason"] = r.finish == FinishReason::Length ? "length" : "stop";
  j["total_duration"] = nanoseconds(r.timing.total_seconds);
  j["load_duration"] = 0;  // the model is loaded when the server starts
  j["prompt_eval_count"] = u.prompt_tokens - u.cached_tokens;
  j["prompt_eval_duration"] = nanoseconds(r.timing.prefill_seconds);
  j["eval_count"] = u.completion_tokens;
  j["eval_duration"] = nanoseconds(r.timing.decode_seconds);
  return j;
}

ordered_json ollama_answer(const OllamaMeta& m, const RequestResult& r, const Usage& u,
                           ToolCallSyntax tools) {
  if (m.kind == OllamaKind::Chat && tools != ToolCallSyntax::None)
    if (ParsedReply reply = parse_tool_calls(tools, r.text); !reply.calls.empty()) {
      ordered_json j = ollama_final(m, r, u, reply.content);
      j["message"]["tool_calls"] = ollama_tool_calls(reply);
      return j;
    }
  return ollama_final(m, r, u, r.text);
}

}  // namespace tangram::server
