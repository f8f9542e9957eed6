// Parsing JSON that comes from outside the process (request bodies, tool-call arguments, model
// output, files) with limits that hold while the bytes are parsed, before any tree is built
// past them: nesting depth and the number of values. Everything downstream that recurses over a
// parsed value (copies, dumps, comparisons, template conversions, destructors) is then bounded by
// the same depth, and the tree's memory by the value count.
//
// Every JSON parse of bytes that did not come from this process goes through here; a test keeps
// it that way (tests/common/json_parse_test.cpp greps the sources).
#pragma once

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace tangram {

struct JsonLimits {
  // Nesting of arrays and objects; the top-level value is depth 1. OpenAI requests with tool
  // schemas nest about 10 deep; 64 is far above any real request and far below a stack's limit.
  size_t max_depth = 64;
  // Values of any kind (scalars, arrays, objects), counted as they are parsed. A parsed value costs
  // at most about 80 bytes of heap, so this caps one parse's tree at about 40 MiB whatever the
  // input; 2^19 holds a prompt of 128K token ids four times over.
  size_t max_values = size_t{1} << 19;
};

// The value, or why the text is not JSON or exceeds the limits ("nests deeper than 64 levels",
// "holds more than 524288 values", or nlohmann's syntax message with its byte position).
Result<nlohmann::json> parse_json(std::string_view text, const JsonLimits& limits = {});
Result<nlohmann::ordered_json> parse_ordered_json(std::string_view text,
                                                  const JsonLimits& limits = {});
// The same, for callers that only test the value: a discarded value (is_discarded()) on failure.
nlohmann::json parse_json_or_discarded(std::string_view text, const JsonLimits& limits = {});

}  // namespace tangram
