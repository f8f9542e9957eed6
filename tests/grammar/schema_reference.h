// A plain JSON Schema validator for the subset json_schema.h compiles: the reference the
// matcher's outputs are checked against (written from the JSON Schema spec, not from the matcher).
#pragma once

#include <nlohmann/json.hpp>

namespace tangram::testing {

bool schema_accepts(const nlohmann::json& schema, const nlohmann::json& value);

}  // namespace tangram::testing
