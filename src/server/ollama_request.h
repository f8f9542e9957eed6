// Ollama's API requests (POST /api/chat, /api/generate) read into what the chat and completion
// paths serve. Ollama's field names: "options" holds the sampling settings (num_predict,
// temperature, top_k, top_p, min_p, stop, seed, repeat_penalty, repeat_last_n,
// presence_penalty, frequency_penalty), "format" is "json" or a JSON Schema, "stream" defaults to
// true. Settings of the process rather than the request (num_ctx, num_thread, num_gpu,
// keep_alive, ...) are the server's own flags and are ignored here, as Ollama ignores them for
// a model already loaded; those that would change the output and are not served (images,
// thinking, mirostat, typical_p) are refused.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace tangram::server {

struct OllamaChatRequest {
  GenerationFields gen;
  std::vector<ChatMessage> messages;
  nlohmann::json tools =
      nlohmann::json::array();  // Ollama's tools are chat's: {"type": "function"}
};

struct OllamaGenerateRequest {
  GenerationFields gen;
  std::string prompt;
  std::string system;  // "" = the template's default
  bool raw = false;    // the prompt is sent as is, without the chat template
  // An empty prompt only asks for the model to be loaded: answered at once, done_reason "load".
  bool load_only = false;
};

std::variant<OllamaChatRequest, ApiError> parse_ollama_chat(const std::string& body,
                                                            const RequestDefaults& defaults);
std::variant<OllamaGenerateRequest, ApiError> parse_ollama_generate(
    const std::string& body, const RequestDefaults& defaults);

// POST /api/show: {"model"} (or the older {"name"}).
std::variant<std::string, ApiError> parse_ollama_show(const std::string& body);

}  // namespace tangram::server
