// Parsing and validation of OpenAI request bodies (/v1/chat/completions, /v1/completions) into
// what the engine needs. Every field is type- and range-checked here, so a handler never sees a
// malformed request; the first problem found comes back as an ApiError naming the field.
//
// Fields that would change what a client gets back but that Tangram does not implement (n > 1,
// logit_bias, ...) are refused rather than silently ignored;
// harmless ones (user, metadata, store, ...) are ignored, as OpenAI-compatible servers do.
#pragma once

#include <cstdint>
#include <optional>

#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "runtime/sampling_params.h"
#include "server/api_error.h"

namespace tangram::server {

// response_format json_object / json_schema (Responses: text.format): the output's shape,
// enforced by constrained decoding (output_constraint.h compiles it).
struct OutputFormat {
  bool any_object = false;  // json_object: any JSON object
  nlohmann::json schema;    // json_schema: the schema
  std::string name;         // json_schema: its name
  bool strict = false;      // as sent (the output is held to the schema either way)
};

// tool_choice: whether the model must call a tool (required), this one (named), or may (auto).
struct ToolChoice {
  enum class Mode { Auto, Required, Named };
  Mode mode = Mode::Auto;
  std::string name;  // Named
};

struct GenerationFields {
  std::string model;
  SamplingParams params;  // max_tokens 0 = up to the context
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::string session_id;      // "" = none given (the X-Session-Id header may still give one)
  // >= 0: report each token's log-probability and this many alternatives (chat: logprobs with
  // top_logprobs 0-20; completions: logprobs 0-5). -1: none.
  int top_logprobs = -1;
  std::optional<OutputFormat> format;  // none: free text
  // Choices for the one prompt (1 to kMaxChoices): prefilled once, decoded n times. A
  // conversation continues with choice 0.
  int n = 1;
};

struct ChatCompletionRequest {
  GenerationFields gen;
  std::vector<ChatMessage> messages;
  // The functions the model may call, as sent ([{"type": "function", "function": {...}}]);
  // empty when none were given or tool_choice is "none".
  nlohmann::json tools = nlohmann::json::array();
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;
};

struct CompletionRequest {
  GenerationFields gen;
  std::variant<std::string, std::vector<int32_t>> prompt;  // text, or token ids
  bool echo = false;
};

// The defaults a request starts from (the server's own; OpenAI's are temperature 1, top_p 1).
struct RequestDefaults {
  SamplingParams params;
  int32_t vocab_size = 0;  // token ids of a token-list prompt must be below it
};

// Parses a request body. Errors: invalid JSON or UTF-8, a non-object body, wrong types, missing
// or empty messages/prompt, out-of-range values, unsupported features.
std::variant<ChatCompletionRequest, ApiError> parse_chat_request(const std::string& body,
                                                                 const RequestDefaults& defaults);
std::variant<CompletionRequest, ApiError> parse_completion_request(const std::string& body,
                                                                   const RequestDefaults& defaults);

// llama.cpp's server helpers. POST /tokenize: {"content", "add_special" (false),
// "parse_special" (true), "with_pieces" (false)}; POST /detokenize: {"tokens": [ids]}.
struct TokenizeRequest {
  std::string content;
  bool add_special = false;
  bool parse_special = true;
  bool with_pieces = false;
};
struct DetokenizeRequest {
  std::vector<int32_t> tokens;
};
std::variant<TokenizeRequest, ApiError> parse_tokenize_request(const std::string& body);
std::variant<DetokenizeRequest, ApiError> parse_detokenize_request(const std::string& body,
                                                                   int32_t vocab_size);

// A response_format object ({"type": "text" | "json_object" | "json_schema", ...}); field names
// the request field for errors. Chat nests the schema ({"json_schema": {"name", "schema",
// "strict"}}); the Responses API's text.format holds those keys itself (nested = false).
std::variant<std::optional<OutputFormat>, ApiError> parse_output_format(
    const nlohmann::json& format, const std::string& field, bool nested);
// A tool_choice value: "none", "auto", "required", {"type": "function", "function": {"name"}}
// (chat) or {"type": "function", "name"} (Responses). none_chosen: it was "none".
std::variant<ToolChoice, ApiError> parse_tool_choice(const nlohmann::json& choice,
                                                     bool& none_chosen);

// tools: [{"type": "function", "function": {"name", "description"?, "parameters"?}}], as chat
// and Ollama's API send them and the templates take them; checked into `tools` (left as it is
// when the field is absent or null).
std::optional<ApiError> read_function_tools(const nlohmann::json& j, nlohmann::json& tools);

// A session id a client may choose: 1 to 128 characters of [A-Za-z0-9._:-].
bool valid_session_id(const std::string& id);
// The body's "session_id" (Tangram's extension, every generating endpoint), checked.
std::optional<ApiError> read_session_id(const nlohmann::json& j, std::string& out);

}  // namespace tangram::server
