// OpenAI-style API errors: what a handler returns instead of a response, and the JSON body
// clients expect: {"error": {"message", "type", "param", "code"}}.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tangram::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";  // OpenAI's error types
  std::string param;                           // the offending field ("" = none: null in JSON)
  std::string code;                            // machine-readable ("" = none)
  int retry_after_s = 0;                       // 429: the Retry-After header (seconds)
};

inline ApiError bad_request(std::string message, std::string param = {}, std::string code = {}) {
  return ApiError{
      400, std::move(message), "invalid_request_error", std::move(param), std::move(code), 0};
}

inline nlohmann::json error_json(const ApiError& e) {
  nlohmann::json err = {
      {"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  return {{"error", err}};
}

}  // namespace tangram::server
