// Typed reads of request-body fields, shared by every endpoint's parser: each returns the first
// problem as an ApiError naming the field, so a handler never sees a malformed value.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "common/json_parse.h"
#include "runtime/sampling_params.h"
#include "server/api_error.h"

namespace tangram::server {

// The body as a JSON object, or why it is not one (empty, not JSON, not an object).
std::variant<nlohmann::json, ApiError> parse_object(const std::string& body);

// "null", "a boolean", "a number", "a string", "an array" or "an object".
std::string json_type_name(const nlohmann::json& v);
ApiError wrong_type(const std::string& field, const char* want, const nlohmann::json& got);

// Optional fields: absent or null leaves `out` as it is.
std::optional<ApiError> read_number(const nlohmann::json& j, const char* field, double lo,
                                    double hi, float& out);
std::optional<ApiError> read_int(const nlohmann::json& j, const char* field, int64_t lo, int64_t hi,
                                 int64_t& out);
std::optional<ApiError> read_bool(const nlohmann::json& j, const char* field, bool& out);
std::optional<ApiError> read_string(const nlohmann::json& j, const char* field, std::string& out);

// An optional array field `key` of `holder` (named `path` in errors): absent or null is nothing,
// anything but an array an error; else `each` runs on every element with its name ("path[i]"),
// and its first error is returned.
using ElementReader =
    std::function<std::optional<ApiError>(const nlohmann::json& element, const std::string& name)>;
std::optional<ApiError> for_each_element(const nlohmann::json& holder, const char* key,
                                         const std::string& path, const ElementReader& each);

// The "messages" array of a chat request (OpenAI's, Anthropic's, Ollama's): present, an array, and
// not empty; its address, or the error naming what is wrong.
std::variant<const nlohmann::json*, ApiError> message_array(const nlohmann::json& j);

// The sampling fields every generation endpoint shares: temperature, top_p, presence_penalty,
// frequency_penalty, seed, stop, and llama.cpp's extensions min_p, top_k, repeat_penalty,
// ignore_eos. The token limit is each endpoint's own (max_tokens, max_output_tokens).
std::optional<ApiError> read_sampling(const nlohmann::json& j, SamplingParams& p);

}  // namespace tangram::server
