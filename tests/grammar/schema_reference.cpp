#include "grammar/schema_reference.h"

#include <cmath>
#include <string>

namespace tangram::testing {
namespace {

using nlohmann::json;

bool has_type(const json& v, const std::string& t) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "number") return v.is_number();
  if (t == "integer")
    return v.is_number_integer() ||
           (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  return false;
}

// Unicode code points in a (well-formed UTF-8) string: JSON Schema's string length.
size_t code_points(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

bool within_numeric_bounds(const json& s, double v) {
  if (s.contains("minimum") && v < s["minimum"].get<double>()) return false;
  if (s.contains("maximum") && v > s["maximum"].get<double>()) return false;
  if (s.contains("exclusiveMinimum") && v <= s["exclusiveMinimum"].get<double>()) return false;
  if (s.contains("exclusiveMaximum") && v >= s["exclusiveMaximum"].get<double>()) return false;
  return true;
}

}  // namespace

bool schema_accepts(const json& s, const json& v) {
  if (s.is_boolean()) return s.get<bool>();
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!s.contains(key)) continue;
    int matches = 0;
    for (const json& branch : s[key]) matches += schema_accepts(branch, v) ? 1 : 0;
    if (matches == 0) return false;
  }
  if (s.contains("const") && s["const"] != v) return false;
  if (s.contains("enum")) {
    bool found = false;
    for (const json& e : s["enum"]) found = found || e == v;
    if (!found) return false;
  }
  if (auto t = s.find("type"); t != s.end()) {
    bool ok = false;
    if (t->is_string())
      ok = has_type(v, t->get<std::string>());
    else
      for (const json& e : *t) ok = ok || has_type(v, e.get<std::string>());
    if (!ok) return false;
  }
  if (v.is_object()) {
    const json props = s.value("properties", json::object());
    for (const json& r : s.value("required", json::array()))
      if (!v.contains(r.get<std::string>())) return false;
    for (const auto& [k, val] : v.items()) {
      if (props.contains(k)) {
        if (!schema_accepts(props[k], val)) return false;
      } else if (s.contains("additionalProperties") &&
                 !schema_accepts(s["additionalProperties"], val)) {
        return false;
      }
    }
  }
  if (v.is_string()) {
    const size_t length = code_points(v.get<std::string>());
    if (s.contains("minLength") && length < s["minLength"].get<size_t>()) return false;
    if (s.contains("maxLength") && length > s["maxLength"].get<size_t>()) return false;
  }
  if (v.is_number() && !within_numeric_bounds(s, v.get<double>())) return false;
  if (v.is_array()) {
    if (s.contains("items"))
      for (const json& item : v)
        if (!schema_accepts(s["items"], item)) return false;
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
  }
  return true;
}

}  // namespace tangram::testing
