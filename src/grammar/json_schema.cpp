#include "grammar/json_schema.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>

namespace tangram {
namespace {

using nlohmann::json;

constexpr int kMaxDepth = 32;
constexpr size_t kMaxNodes = 4096;
constexpr size_t kMaxProperties = 64;

constexpr std::array<std::string_view, 12> kAnnotations = {
    "title",    "description", "default",     "examples",   "$schema",  "$id",
    "$comment", "$defs",       "definitions", "deprecated", "readOnly", "writeOnly"};
constexpr std::array<std::string_view, 17> kSupported = {"type",
                                                         "properties",
                                                         "required",
                                                         "additionalProperties",
                                                         "items",
                                                         "minItems",
                                                         "maxItems",
                                                         "minLength",
                                                         "maxLength",
                                                         "minimum",
                                                         "maximum",
                                                         "exclusiveMinimum",
                                                         "exclusiveMaximum",
                                                         "enum",
                                                         "const",
                                                         "anyOf",
                                                         "oneOf"};
constexpr std::array<std::string_view, 2> kLengthWords = {"minLength", "maxLength"};
constexpr std::array<std::string_view, 4> kBoundWords = {"minimum", "maximum", "exclusiveMinimum",
                                                         "exclusiveMaximum"};

template <size_t N>
bool has_any(const nlohmann::json& s, const std::array<std::string_view, N>& words) {
  return std::any_of(words.begin(), words.end(), [&](std::string_view w) { return s.contains(w); });
}

template <size_t N>
bool listed(const std::array<std::string_view, N>& list, std::string_view key) {
  return std::find(list.begin(), list.end(), key) != list.end();
}

// A JSON pointer's next step (RFC 6901 escapes).
std::string child_path(const std::string& path, std::string_view step) {
  std::string out = path + "/";
  for (char c : step) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string where(const std::string& path) {
  return path.empty() ? "the schema's root" : "'" + path + "'";
}

bool value_has_type(const json& v, std::string_view type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    if (v.is_number_integer()) return true;
    const double d = v.is_number_float() ? v.get<double>() : 0.5;
    return std::isfinite(d) && std::floor(d) == d;
  }
  return false;
}

// A property name the model can type as is between quotes.
bool plain_key(std::string_view key) {
  for (char c : key)
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) return false;
  return true;
}

// Code points in well-formed UTF-8: the bytes that are not continuation bytes.
int64_t code_points(std::string_view text) {
  return std::count_if(text.begin(), text.end(),
                       [](char c) { return (static_cast<uint8_t>(c) & 0xC0) != 0x80; });
}

// The integer bound a JSON number sets, clamped to the matcher's 16 digits: the least integer
// above it (lower bounds) or the greatest below it (upper bounds), strictly when exclusive.
int64_t integer_bound(const json& v, bool lower, bool exclusive) {
  constexpr double kClamp = 1e17;  // past the 16 digits either way, and exact in an int64
  int64_t bound = 0;
  if (v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{1} << 62)) {
    bound = std::clamp<int64_t>(v.get<int64_t>(), -static_cast<int64_t>(kClamp),
                                static_cast<int64_t>(kClamp));
    if (exclusive) bound += lower ? 1 : -1;
  } else {
    const double d = std::clamp(v.get<double>(), -kClamp, kClamp);
    double rounded = lower ? std::ceil(d) : std::floor(d);
    if (exclusive && rounded == d) rounded += lower ? 1 : -1;
    bound = static_cast<int64_t>(rounded);
  }
  return std::clamp(bound, -kMaxIntegerMagnitude - 1, kMaxIntegerMagnitude + 1);
}

// The string-length and numeric bounds a schema sets (validated), and whether a value meets them.
struct ValueBounds {
  int32_t min_length = 0, max_length = -1;
  bool numeric = false;
  int64_t min_value = -kMaxIntegerMagnitude, max_value = kMaxIntegerMagnitude;  // integers within
  // As written, for enum/const values (which need not be integers).
  double lowest = -HUGE_VAL, highest = HUGE_VAL;
  bool lowest_excluded = false, highest_excluded = false;

  bool admits(const json& v) const {
    if (v.is_string()) {
      const int64_t n = code_points(v.get_ref<const std::string&>());
      return n >= min_length && (max_length < 0 || n <= max_length);
    }
    if (!v.is_number() || !numeric) return true;
    const double d = v.get<double>();
    return (lowest_excluded ? d > lowest : d >= lowest) &&
           (highest_excluded ? d < highest : d <= highest);
  }
};

Result<ValueBounds> bounds_of(const json& s, const std::string& path) {
  ValueBounds b;
  for (std::string_view key : kLengthWords) {
    auto it = s.find(key);
    if (it == s.end()) continue;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 1'000'000)
      return make_error("'{}' at {} must be an integer from 0 to 1000000", key, where(path));
    (key == "minLength" ? b.min_length : b.max_length) = static_cast<int32_t>(it->get<int64_t>());
  }
  if (b.max_length >= 0 && b.max_length < b.min_length)
    return make_error("'maxLength' is below 'minLength' at {}: no string can match", where(path));
  for (std::string_view key : kBoundWords) {
    auto it = s.find(key);
    if (it == s.end()) continue;
    if (!it->is_number())
      return make_error("'{}' at {} must be a number (draft-4 boolean forms are not supported)",
                        key, where(path));
    b.numeric = true;
    const bool lower = key == "minimum" || key == "exclusiveMinimum";
    const bool exclusive = key.starts_with("exclusive");
    const int64_t bound = integer_bound(*it, lower, exclusive);
    const double raw = it->get<double>();
    if (lower) {
      b.min_value = std::max(b.min_value, bound);
      if (raw > b.lowest || (raw == b.lowest && exclusive))
        b.lowest = raw, b.lowest_excluded = exclusive;
    } else {
      b.max_value = std::min(b.max_value, bound);
      if (raw < b.highest || (raw == b.highest && exclusive))
        b.highest = raw, b.highest_excluded = exclusive;
    }
  }
  return b;
}

class SchemaCompiler {
 public:
  explicit SchemaCompiler(JsonSchemaGraph& g) : g_(g) {}

  Result<int32_t> slot(const json& s, const std::string& path, int depth);
  int32_t any();

 private:
  Result<int32_t> add_node(JsonNode node) {
    if (g_.nodes.size() >= kMaxNodes)
      return make_error("the schema is too large (over {} nodes)", kMaxNodes);
    g_.nodes.push_back(std::move(node));
    return static_cast<int32_t>(g_.nodes.size() - 1);
  }
  int32_t add_choice(std::vector<int32_t> alternatives) {
    g_.choices.push_back(std::move(alternatives));
    return static_cast<int32_t>(g_.choices.size() - 1);
  }
  Status check_keywords(const json& s, const std::string& path) const;
  Result<int32_t> any_of(const json& s, const char* key, const std::string& path, int depth);
  Result<int32_t> literals(const json& s, const std::vector<std::string>& types,
                           const std::string& path);
  Result<int32_t> typed(const json& s, std::string_view type, const std::string& path, int depth);
  Result<int32_t> object(const json& s, const std::string& path, int depth);
  Result<int32_t> array(const json& s, const std::string& path, int depth);
  static Result<std::vector<std::string>> types_of(const json& s, const std::string& path);

  JsonSchemaGraph& g_;
};

Status SchemaCompiler::check_keywords(const json& s, const std::string& path) const {
  for (const auto& [key, value] : s.items()) {
    if (listed(kAnnotations, key) || listed(kSupported, key)) continue;
    return make_error(
        "the JSON Schema keyword '{}' at {} is not supported for constrained output (supported: "
        "type, "
        "properties, required, additionalProperties, items, minItems, maxItems, minLength, "
        "maxLength, "
        "minimum, maximum, exclusiveMinimum, exclusiveMaximum, enum, const, anyOf, oneOf)",
        key, where(path));
  }
  return {};
}

int32_t SchemaCompiler::any() {
  int32_t& any_ = g_.any_choice;
  if (any_ >= 0) return any_;
  any_ = add_choice({});
  const auto base = static_cast<int32_t>(g_.nodes.size());
  JsonNode obj, arr, str, num, lit;
  obj.kind = JsonNodeKind::Object;
  obj.additional = any_;
  arr.kind = JsonNodeKind::Array;
  arr.items = any_;
  str.kind = JsonNodeKind::String;
  num.kind = JsonNodeKind::Number;
  lit.literals = {"false", "null", "true"};
  for (JsonNode* n : {&obj, &arr, &str, &num, &lit}) g_.nodes.push_back(std::move(*n));
  g_.choices[static_cast<size_t>(any_)] = {base, base + 1, base + 2, base + 3, base + 4};
  return any_;
}

Result<std::vector<std::string>> SchemaCompiler::types_of(const json& s, const std::string& path) {
  static constexpr std::array<std::string_view, 7> kTypes = {
      "object", "array", "string", "number", "integer", "boolean", "null"};
  std::vector<std::string> types;
  auto t = s.find("type");
  if (t == s.end()) return types;
  if (t->is_string()) {
    types.push_back(t->get<std::string>());
  } else if (t->is_array() && !t->empty()) {
    for (const json& e : *t) {
      if (!e.is_string())
        return make_error("'type' at {} must be a string or an array of strings", where(path));
      types.push_back(e.get<std::string>());
    }
  } else {
    return make_error("'type' at {} must be a string or a non-empty array of strings", where(path));
  }
  for (const std::string& type : types)
    if (!listed(kTypes, type)) return make_error("unknown type '{}' at {}", type, where(path));
  // "number" already takes every integer: matching both would offer the same text twice.
  if (std::find(types.begin(), types.end(), "number") != types.end())
    std::erase(types, std::string("integer"));
  return types;
}

Result<int32_t> SchemaCompiler::slot(const json& s, const std::string& path, int depth) {
  if (depth > kMaxDepth)
    return make_error("the schema nests deeper than {} levels at {}", kMaxDepth, where(path));
  if (s.is_boolean()) {
    if (s.get<bool>()) return any();
    return make_error("the schema at {} is false: no value can match it", where(path));
  }
  if (!s.is_object())
    return make_error("the schema at {} must be an object or a boolean", where(path));
  TG_TRY(check_keywords(s, path));
  for (const char* key : {"anyOf", "oneOf"})
    if (s.contains(key)) return any_of(s, key, path, depth);
  TG_ASSIGN(std::vector<std::string> types, types_of(s, path));
  if (s.contains("enum") || s.contains("const")) return literals(s, types, path);
  if (types.empty()) {
    const bool object_words =
        s.contains("properties") || s.contains("required") || s.contains("additionalProperties");
    const bool array_words =
        s.contains("items") || s.contains("minItems") || s.contains("maxItems");
    if (object_words) types.push_back("object");
    if (array_words) types.push_back("array");
    if (has_any(s, kLengthWords)) types.push_back("string");
    if (has_any(s, kBoundWords)) types.push_back("number");
    if (types.empty()) return any();
  }
  std::vector<int32_t> alternatives;
  for (const std::string& type : types) {
    TG_ASSIGN(int32_t node, typed(s, type, path, depth));
    alternatives.push_back(node);
  }
  return add_choice(std::move(alternatives));
}

Result<int32_t> SchemaCompiler::any_of(const json& s, const char* key, const std::string& path,
                                       int depth) {
  for (const char* other :
       {"type", "properties", "items", "enum", "const", "anyOf", "oneOf", "required",
        "additionalProperties", "minItems", "maxItems", "minLength", "maxLength", "minimum",
        "maximum", "exclusiveMinimum", "exclusiveMaximum"})
    if (std::string_view(other) != key && s.contains(other))
      return make_error("'{}' alongside '{}' at {} is not supported: put it inside each branch",
                        other, key, where(path));
  const json& branches = s[key];
  const std::string here = child_path(path, key);
  if (!branches.is_array() || branches.empty())
    return make_error("'{}' at {} must be a non-empty array of schemas", key, where(path));
  std::vector<int32_t> alternatives;
  for (size_t i = 0; i < branches.size(); ++i) {
    TG_ASSIGN(int32_t choice, slot(branches[i], child_path(here, std::to_string(i)), depth + 1));
    for (int32_t node : g_.choices[static_cast<size_t>(choice)])
      if (std::find(alternatives.begin(), alternatives.end(), node) == alternatives.end())
        alternatives.push_back(node);
  }
  return add_choice(std::move(alternatives));
}

Result<int32_t> SchemaCompiler::literals(const json& s, const std::vector<std::string>& types,
                                         const std::string& path) {
  std::vector<json> values;
  if (auto c = s.find("const"); c != s.end()) values.push_back(*c);
  if (auto e = s.find("enum"); e != s.end()) {
    if (!e->is_array() || e->empty())
      return make_error("'enum' at {} must be a non-empty array", where(path));
    if (s.contains("const"))
      return make_error("'enum' and 'const' together at {} are not supported", where(path));
    values.insert(values.end(), e->begin(), e->end());
  }
  JsonNode node;
  node.kind = JsonNodeKind::Literals;
  TG_ASSIGN(const ValueBounds bounds, bounds_of(s, path));
  for (const json& v : values) {
    const bool typed_ok =
        types.empty() || std::any_of(types.begin(), types.end(),
                                     [&](const std::string& t) { return value_has_type(v, t); });
    if (typed_ok && bounds.admits(v))
      node.literals.push_back(
          v.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace));
  }
  if (node.literals.empty())
    return make_error("no value of 'enum'/'const' at {} has the schema's type and bounds",
                      where(path));
  std::sort(node.literals.begin(), node.literals.end());
  node.literals.erase(std::unique(node.literals.begin(), node.literals.end()), node.literals.end());
  TG_ASSIGN(int32_t index, add_node(std::move(node)));
  return add_choice({index});
}

Result<int32_t> SchemaCompiler::typed(const json& s, std::string_view type, const std::string& path,
                                      int depth) {
  JsonNode node;
  if (type == "object") return object(s, path, depth);
  if (type == "array") return array(s, path, depth);
  if (type == "string") node.kind = JsonNodeKind::String;
  if (type == "number") node.kind = JsonNodeKind::Number;
  if (type == "integer") node.kind = JsonNodeKind::Integer;
  if (type == "boolean") node.literals = {"false", "true"};
  if (type == "null") node.literals = {"null"};
  TG_ASSIGN(const ValueBounds bounds, bounds_of(s, path));
  if (node.kind == JsonNodeKind::String) {
    node.min_length = bounds.min_length;
    node.max_length = bounds.max_length;
  }
  if ((node.kind == JsonNodeKind::Number || node.kind == JsonNodeKind::Integer) && bounds.numeric) {
    if (bounds.min_value > bounds.max_value)
      return make_error(
          "no integer of at most 16 digits lies within the bounds at {} (a bounded '{}' is matched "
          "as an integer: fractions and exponents are not written)",
          where(path), type);
    node.bounded = true;
    node.min_value = bounds.min_value;
    node.max_value = bounds.max_value;
  }
  return add_node(std::move(node));
}

Result<int32_t> SchemaCompiler::object(const json& s, const std::string& path, int depth) {
  JsonNode node;
  node.kind = JsonNodeKind::Object;
  if (auto p = s.find("properties"); p != s.end()) {
    if (!p->is_object()) return make_error("'properties' at {} must be an object", where(path));
    if (p->size() > kMaxProperties)
      return make_error("objects with more than {} properties are not supported ({})",
                        kMaxProperties, where(path));
    const std::string here = child_path(path, "properties");
    for (const auto& [key, sub] : p->items()) {
      if (!plain_key(key))
        return make_error(
            "property name {} at {}: names with quotes, backslashes or control characters are not "
            "supported",
            json(key).dump(), where(path));
      TG_ASSIGN(int32_t value, slot(sub, child_path(here, key), depth + 1));
      node.properties.push_back(JsonProperty{key, value, false});
    }
    std::sort(node.properties.begin(), node.properties.end(),
              [](const JsonProperty& a, const JsonProperty& b) { return a.key < b.key; });
  }
  if (auto r = s.find("required"); r != s.end()) {
    if (!r->is_array())
      return make_error("'required' at {} must be an array of names", where(path));
    for (const json& name : *r) {
      if (!name.is_string())
        return make_error("'required' at {} must be an array of names", where(path));
      auto it = std::find_if(
          node.properties.begin(), node.properties.end(),
          [&](const JsonProperty& p) { return p.key == name.get_ref<const std::string&>(); });
      if (it == node.properties.end())
        return make_error(
            "'required' at {} names '{}', which is not in 'properties' (constrained output needs "
            "its "
            "schema)",
            where(path), name.get<std::string>());
      it->required = true;
      node.required_mask |= uint64_t{1} << (it - node.properties.begin());
    }
  }
  auto extra = s.find("additionalProperties");
  if (extra == s.end() || (extra->is_boolean() && extra->get<bool>())) {
    node.additional = any();
  } else if (!(extra->is_boolean() && !extra->get<bool>())) {
    TG_ASSIGN(int32_t value, slot(*extra, child_path(path, "additionalProperties"), depth + 1));
    node.additional = value;
  }
  return add_node(std::move(node));
}

Result<int32_t> SchemaCompiler::array(const json& s, const std::string& path, int depth) {
  JsonNode node;
  node.kind = JsonNodeKind::Array;
  if (auto it = s.find("items"); it != s.end()) {
    TG_ASSIGN(int32_t items, slot(*it, child_path(path, "items"), depth + 1));
    node.items = items;
  } else {
    node.items = any();
  }
  for (const char* key : {"minItems", "maxItems"}) {
    auto it = s.find(key);
    if (it == s.end()) continue;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 1'000'000)
      return make_error("'{}' at {} must be an integer from 0 to 1000000", key, where(path));
    (std::string_view(key) == "minItems" ? node.min_items : node.max_items) =
        static_cast<int32_t>(it->get<int64_t>());
  }
  if (node.max_items >= 0 && node.max_items < node.min_items)
    return make_error("'maxItems' is below 'minItems' at {}: no array can match", where(path));
  return add_node(std::move(node));
}

}  // namespace

int32_t JsonSchemaGraph::add_any() { return SchemaCompiler(*this).any(); }

Result<int32_t> JsonSchemaGraph::add_schema(const nlohmann::json& schema) {
  return SchemaCompiler(*this).slot(schema, "", 0);
}

Result<JsonSchemaGraph> compile_json_schema(const nlohmann::json& schema) {
  JsonSchemaGraph g;
  TG_ASSIGN(g.root, g.add_schema(schema));
  return g;
}

JsonSchemaGraph any_json_object() {
  JsonSchemaGraph g;
  const int32_t any = g.add_any();
  g.nodes.push_back(JsonNode{JsonNodeKind::Object, {}, 0, any, -1, 0, -1, {}});
  g.choices.push_back({static_cast<int32_t>(g.nodes.size() - 1)});
  g.root = static_cast<int32_t>(g.choices.size() - 1);
  return g;
}

}  // namespace tangram
