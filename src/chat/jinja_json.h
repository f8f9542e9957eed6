// Conversions between nlohmann JSON and interpreter values, and Python's json.dumps (what Hugging
// Face's `tojson` filter calls), byte for byte.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja_value.h"

namespace tangram::jinja {

// Deepest JSON nesting accepted from callers (deeper input is an Error, not a stack overflow).
constexpr uint32_t kMaxJsonDepth = 128;

Result<Value> value_from_json(const nlohmann::json& j);
Result<Value> value_from_json(const nlohmann::ordered_json& j);
// Back to JSON (undefined, objects and callables are errors), keeping dict order.
Result<nlohmann::ordered_json> value_to_json(const Value& v);

// json.dumps(obj, ensure_ascii, indent, separators, sort_keys).
struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // None, or the text repeated per level
  std::optional<std::pair<std::string, std::string>> separators;  // (item, key)
  bool sort_keys = false;
};
Result<std::string> py_json_dumps(const Value& v, const JsonDumpOptions& options);

}  // namespace tangram::jinja
