// A JSON Schema subset compiled into the graph the output matcher walks (json_matcher.h).
//
// Supported: "type" (object, array, string, number, integer, boolean, null, or a list of them);
// objects with "properties", "required" and "additionalProperties" (false, true or a schema;
// absent means true, as JSON Schema says); arrays with "items", "minItems", "maxItems";
// strings with "minLength", "maxLength" (in Unicode code points; an escape is one character);
// integers and numbers with "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"
// (numbers, not draft-4 booleans). A bounded "number" is matched as an integer in the bounds
// (no fraction or exponent): always a valid value, and refused when the bounds hold no integer
// within the matcher's 16 digits (e.g. minimum 0.5, maximum 0.7). Without "type", these words
// imply string / number, as "properties" implies object;
// "enum" and "const" (any JSON values); "anyOf" and "oneOf" (oneOf is matched as anyOf: its
// branches should not overlap); nested schemas to a depth of 32; `true` / `{}` as any value.
// Annotations (title, description, default, examples, $schema, $id, $comment, $defs and
// definitions as containers, deprecated, readOnly, writeOnly) are ignored. Every other keyword
// (pattern, format, multipleOf, $ref, allOf, not, ...) is refused with an error naming
// it and where it is, so an output is never claimed to match a schema it was not held to.
//
// Limits (refused beyond them): 64 properties per object, property names without quotes,
// backslashes or control characters, 4096 nodes in all.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace tangram {

// The largest magnitude the matcher writes in an integer part (16 digits): bounds are clamped to
// it.
constexpr int64_t kMaxIntegerMagnitude = 9'999'999'999'999'999;

enum class JsonNodeKind : uint8_t { Object, Array, String, Number, Integer, Literals };

struct JsonProperty {
  std::string key;     // the name as typed between the quotes (raw UTF-8)
  int32_t value = -1;  // choice index of its value
  bool required = false;
};

struct JsonNode {
  JsonNodeKind kind = JsonNodeKind::Literals;
  // Object: properties sorted by key bytes; additional: choice of other keys' values, or -1
  // when no other key is allowed.
  std::vector<JsonProperty> properties;
  uint64_t required_mask = 0;  // bit i: properties[i] is required
  int32_t additional = -1;
  // Array: choice of each item; item count bounds (max -1 = unbounded).
  int32_t items = -1;
  int32_t min_items = 0;
  int32_t max_items = -1;
  // Literals: each allowed value's compact JSON text, sorted and unique.
  std::vector<std::string> literals;
  // String: character (code point) count bounds (max -1 = unbounded).
  int32_t min_length = 0;
  int32_t max_length = -1;
  // Integer / Number: when bounded, the value is an integer in [min_value, max_value] (a bounded
  // Number takes no fraction or exponent).
  bool bounded = false;
  int64_t min_value = 0;
  int64_t max_value = 0;
};

// The nodes, and the choices (a value slot's alternatives: a flattened anyOf) that refer to them.
struct JsonSchemaGraph {
  std::vector<JsonNode> nodes;
  std::vector<std::vector<int32_t>> choices;  // [choice][alternative] node index
  int32_t root = -1;                          // the choice of the whole value
  int32_t any_choice = -1;                    // the "any value" choice, once made

  // A value slot taking any JSON value (of any type, nested to the matcher's depth limit).
  int32_t add_any();
  // Compiles one more schema into this graph; returns its choice index.
  Result<int32_t> add_schema(const nlohmann::json& schema);
};

// The graph of a schema (root = its choice). Errors name the keyword and its JSON pointer.
Result<JsonSchemaGraph> compile_json_schema(const nlohmann::json& schema);
// Any JSON object (response_format json_object).
JsonSchemaGraph any_json_object();

}  // namespace tangram
