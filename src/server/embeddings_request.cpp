#include "server/embeddings_request.h"

#include <limits>

#include <fmt/format.h>

#include "server/json_fields.h"

namespace tangram::server {
namespace {

using nlohmann::json;

ApiError empty_input(const std::string& name) {
  return bad_request(fmt::format("'{}' is empty: give the text (or tokens) to embed", name), name,
                     "invalid_value");
}

// One input: a string, or (when ids are allowed) an array of token ids.
std::optional<ApiError> read_input(const json& v, const std::string& name, bool ids_allowed,
                                   EmbeddingInput& out) {
  if (v.is_string()) {
    out.text = v.get<std::string>();
    if (out.text.empty()) return empty_input(name);
    return std::nullopt;
  }
  if (!ids_allowed || !v.is_array())
    return wrong_type(name, ids_allowed ? "a string or an array of token ids" : "a string", v);
  if (v.empty()) return empty_input(name);
  out.ids.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const json& t = v[i];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() > std::numeric_limits<int32_t>::max())
      return wrong_type(fmt::format("{}[{}]", name, i), "a token id (an integer >= 0)", t);
    out.ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return std::nullopt;
}

// "input": one input, or an array of them. An array of integers is one tokenized input.
std::optional<ApiError> read_inputs(const json& j, bool ids_allowed, EmbeddingsRequest& r) {
  auto it = j.find("input");
  if (it == j.end() || it->is_null())
    return bad_request("'input' is required: the text to embed", "input", "missing_field");
  const json& in = *it;
  const bool one = in.is_string() ||
                   (ids_allowed && in.is_array() && !in.empty() && in.front().is_number_integer());
  if (one) {
    r.inputs.emplace_back();
    return read_input(in, "input", ids_allowed, r.inputs.back());
  }
  if (!in.is_array())
    return wrong_type("input",
                      ids_allowed ? "a string, an array of strings or of token ids"
                                  : "a string or an array of strings",
                      in);
  if (in.empty()) return empty_input("input");
  if (in.size() > kMaxEmbeddingInputs)
    return bad_request(fmt::format("'input' has {} items; at most {} can be embedded in one "
                                   "request: split it",
                                   in.size(), kMaxEmbeddingInputs),
                       "input", "too_many_inputs");
  r.inputs.resize(in.size());
  for (size_t i = 0; i < in.size(); ++i)
    if (auto e = read_input(in[i], fmt::format("input[{}]", i), ids_allowed, r.inputs[i])) return e;
  return std::nullopt;
}

std::optional<ApiError> read_dimensions(const json& j, EmbeddingsRequest& r) {
  if (!j.contains("dimensions") || j["dimensions"].is_null()) return std::nullopt;
  int64_t d = 0;
  if (auto e = read_int(j, "dimensions", 1, std::numeric_limits<int32_t>::max(), d)) return e;
  r.dimensions = d;
  return std::nullopt;
}

}  // namespace

std::variant<EmbeddingsRequest, ApiError> parse_openai_embeddings(const std::string& body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  EmbeddingsRequest r;
  if (auto e = read_string(j, "model", r.model)) return *e;
  if (auto e = read_inputs(j, /*ids_allowed=*/true, r)) return *e;
  std::string format = "float";
  if (auto e = read_string(j, "encoding_format", format)) return *e;
  if (format != "float" && format != "base64")
    return bad_request(
        fmt::format("'encoding_format' is '{}'; it must be 'float' or 'base64'", format),
        "encoding_format", "invalid_value");
  r.base64 = format == "base64";
  if (auto e = read_dimensions(j, r)) return *e;
  std::string user;
  if (auto e = read_string(j, "user", user)) return *e;
  return r;
}

std::variant<EmbeddingsRequest, ApiError> parse_ollama_embed(const std::string& body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  EmbeddingsRequest r;
  if (auto e = read_string(j, "model", r.model)) return *e;
  if (r.model.empty()) return bad_request("'model' is required", "model", "missing_field");
  if (auto e = read_inputs(j, /*ids_allowed=*/false, r)) return *e;
  r.truncate = true;
  if (auto e = read_bool(j, "truncate", r.truncate)) return *e;
  if (auto e = read_dimensions(j, r)) return *e;
  if (auto it = j.find("options"); it != j.end() && !it->is_null() && !it->is_object())
    return wrong_type("options", "an object", *it);
  return r;
}

}  // namespace tangram::server
