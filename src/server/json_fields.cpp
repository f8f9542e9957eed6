#include "server/json_fields.h"

#include <cmath>

#include <fmt/format.h>

namespace tangram::server {

using nlohmann::json;

// Parses the body as a JSON object, or explains why it is not one.
std::variant<json, ApiError> parse_object(const std::string& body) {
  if (body.empty())
    return bad_request("the request body is empty; send a JSON object", {}, "invalid_json");
  // Depth and size are bounded while parsing: nothing deeper than JsonLimits reaches a handler.
  auto parsed = parse_json(body);
  if (!parsed) {
    // nlohmann reports invalid UTF-8 inside strings and numbers like 1e400 as parse errors too.
    return bad_request(fmt::format("the request body is not valid JSON: {}", parsed.message()), {},
                       "invalid_json");
  }
  json j = std::move(parsed).value();
  if (!j.is_object())
    return bad_request("the request body must be a JSON object", {}, "invalid_json");
  return j;
}

std::string json_type_name(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

ApiError wrong_type(const std::string& field, const char* want, const json& got) {
  return bad_request(fmt::format("'{}' must be {}, got {}", field, want, json_type_name(got)),
                     field, "invalid_type");
}

// Reads an optional number field into `out`, range-checked to [lo, hi] (finite).
std::optional<ApiError> read_number(const json& j, const char* field, double lo, double hi,
                                    float& out) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return wrong_type(field, "a number", *it);
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi)
    return bad_request(fmt::format("'{}' must be in [{}, {}], got {}", field, lo, hi, it->dump()),
                       field, "out_of_range");
  out = static_cast<float>(v);
  return std::nullopt;
}

std::optional<ApiError> read_int(const json& j, const char* field, int64_t lo, int64_t hi,
                                 int64_t& out) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) {  // 1.5, 1e30 (read as a float) and strings are all refused
    if (it->is_number())
      return bad_request(
          fmt::format("'{}' must be an integer in [{}, {}], got {}", field, lo, hi, it->dump()),
          field, "out_of_range");
    return wrong_type(field, "an integer", *it);
  }
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi))
    return bad_request(fmt::format("'{}' must be in [{}, {}], got {}", field, lo, hi, it->dump()),
                       field, "out_of_range");
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi)
    return bad_request(fmt::format("'{}' must be in [{}, {}], got {}", field, lo, hi, v), field,
                       "out_of_range");
  out = v;
  return std::nullopt;
}

std::optional<ApiError> read_bool(const json& j, const char* field, bool& out) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return wrong_type(field, "a boolean", *it);
  out = it->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> read_string(const json& j, const char* field, std::string& out) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return wrong_type(field, "a string", *it);
  out = it->get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> for_each_element(const json& holder, const char* key,
                                         const std::string& path, const ElementReader& each) {
  if (!holder.is_object()) return std::nullopt;
  const json& value = holder.value(key, json());
  if (value.is_null()) return std::nullopt;
  if (!value.is_array()) return wrong_type(path, "an array", value);
  size_t i = 0;
  for (const json& element : value)
    if (auto e = each(element, fmt::format("{}[{}]", path, i++))) return e;
  return std::nullopt;
}

std::variant<const json*, ApiError> message_array(const json& j) {
  auto msgs = j.find("messages");
  if (msgs == j.end() || msgs->is_null())
    return bad_request("'messages' is required", "messages", "missing_field");
  if (!msgs->is_array()) return wrong_type("messages", "an array", *msgs);
  if (msgs->empty())
    return bad_request("'messages' must hold at least one message", "messages", "empty_messages");
  return &*msgs;
}

std::optional<ApiError> read_sampling(const json& j, SamplingParams& p) {
  if (auto e = read_number(j, "temperature", 0, 2, p.temperature)) return e;
  if (auto e = read_number(j, "top_p", 0, 1, p.top_p)) return e;
  if (j.contains("top_p") && !(p.top_p > 0.0f))
    return bad_request("'top_p' must be in (0, 1]; 0 would keep no token", "top_p", "out_of_range");
  if (auto e = read_number(j, "presence_penalty", -2, 2, p.presence_penalty)) return e;
  if (auto e = read_number(j, "frequency_penalty", -2, 2, p.frequency_penalty)) return e;
  // Extensions that llama.cpp's server also accepts.
  if (auto e = read_number(j, "min_p", 0, 1, p.min_p)) return e;
  if (auto e = read_number(j, "repeat_penalty", 0.0, 10.0, p.repetition_penalty)) return e;
  if (j.contains("repeat_penalty") && !(p.repetition_penalty > 0.0f))
    return bad_request("'repeat_penalty' must be > 0 (1 = off)", "repeat_penalty", "out_of_range");
  if (auto e = read_bool(j, "ignore_eos", p.ignore_eos)) return e;
  int64_t top_k = p.top_k;
  if (auto e = read_int(j, "top_k", 0, 1'000'000, top_k)) return e;
  p.top_k = static_cast<int>(top_k);
  if (auto it = j.find("seed"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer()) return wrong_type("seed", "an integer", *it);
    p.seed =
        it->is_number_unsigned() ? it->get<uint64_t>() : static_cast<uint64_t>(it->get<int64_t>());
    p.seed_set = true;
  }
  if (auto it = j.find("stop"); it != j.end() && !it->is_null()) {
    std::vector<std::string> stops;
    if (it->is_string()) {
      stops.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      if (it->size() > 4)
        return bad_request("'stop' holds at most 4 strings", "stop", "out_of_range");
      for (const json& s : *it) {
        if (!s.is_string()) return wrong_type("stop[]", "a string", s);
        stops.push_back(s.get<std::string>());
      }
    } else {
      return wrong_type("stop", "a string or an array of strings", *it);
    }
    for (const std::string& s : stops)
      if (s.empty()) return bad_request("'stop' strings must not be empty", "stop", "out_of_range");
    p.stop = std::move(stops);
  }
  return std::nullopt;
}

}  // namespace tangram::server
