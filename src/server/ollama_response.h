// Ollama's API responses: newline-delimited JSON objects ("application/x-ndjson"), each with the
// model and created_at; pieces of text with "done": false, then a last object with "done": true,
// done_reason and the counts and durations (nanoseconds) Ollama reports. Errors are
// {"error": "..."} (a line of its own in a stream).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/tool_calls.h"
#include "scheduler/request.h"
#include "server/api_error.h"
#include "server/openai_response.h"

namespace tangram::server {

// GET /api/version: the Ollama release whose API shapes this server follows (clients such as Open
// WebUI gate features on it).
inline constexpr const char* kOllamaApiVersion = "0.12.0";

// /api/chat answers carry "message": {"role": "assistant", "content"}; /api/generate answers
// carry "response".
enum class OllamaKind { Chat, Generate };

struct OllamaMeta {
  OllamaKind kind = OllamaKind::Chat;
  std::string model;
};

// RFC 3339 in UTC with nanoseconds, as Ollama writes times: "2026-12-07T19:50:01.123456789Z".
std::string rfc3339_utc(int64_t unix_ns);
std::string rfc3339_now();

inline nlohmann::ordered_json ollama_error_json(const ApiError& e) {
  return {{"error", e.message}};
}

// One line of a stream: the JSON and "\n".
std::string ndjson_line(const nlohmann::ordered_json& j);

// A piece of text, "done": false.
nlohmann::ordered_json ollama_chunk(const OllamaMeta& m, std::string_view text);
// Calls as Ollama writes them: [{"function": {"name", "arguments": {...}}}].
nlohmann::ordered_json ollama_tool_calls(const ParsedReply& reply);
// A chat message holding the calls (and the text before them), "done": false.
nlohmann::ordered_json ollama_calls_chunk(const OllamaMeta& m, const ParsedReply& reply);
// The last object: `text` (the whole answer when not streamed, "" at a stream's end), "done":
// true, done_reason ("stop" or "length"), prompt_eval_count (the prompt tokens computed now:
// those whose KV an earlier turn left are not evaluated again), eval_count and the durations.
nlohmann::ordered_json ollama_final(const OllamaMeta& m, const RequestResult& r, const Usage& u,
                                    std::string_view text);
// The non-streamed answer of a request: its text or, for a chat reply that called tools, the
// calls in message.tool_calls.
nlohmann::ordered_json ollama_answer(const OllamaMeta& m, const RequestResult& r, const Usage& u,
                                     ToolCallSyntax tools);

}  // namespace tangram::server
