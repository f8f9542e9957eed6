// Reading and writing the shared "tangram-profile-json/v1" files (retention profiles and
// head-group cluster maps, see data/profiles/README.md): a JSON object with `format`,
// `kind`, `scorer`, `model`, `name`, a free `meta` object and named n-dimensional `arrays`,
// each {"dtype", "shape", "data": flat row-major}. This file only checks the container; what
// each kind needs is checked by profile.cpp and cluster.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace tangram {

inline constexpr std::string_view kProfileJsonFormat = "tangram-profile-json/v1";

// One array of the file. Every dtype is held as double: float32 values, and int32/int64 values
// below 2^53 in magnitude (checked on load), convert exactly.
struct JsonArray {
  std::string dtype;           // float32 | float64 | int32 | int64
  std::vector<int64_t> shape;  // [] for a scalar
  std::vector<double> data;    // [product(shape)] row-major
};

struct ProfileJsonDoc {
  std::string path;  // where it was read from (for messages)
  std::string kind, scorer, model, name;
  nlohmann::json meta = nlohmann::json::object();
  std::map<std::string, JsonArray> arrays;

  // The array `name` with this dtype and shape; -1 in `shape` accepts any extent there.
  Result<const JsonArray*> array(const std::string& array_name, std::string_view want_dtype,
                                 const std::vector<int64_t>& want_shape) const;
};

// Parses and checks the container (format, kind, array dtypes, shapes against data lengths,
// integer values of integer dtypes). Never throws; malformed input gives an Error naming the
// file and the offending array.
Result<ProfileJsonDoc> read_profile_json(const std::string& path, std::string_view want_kind);

// Array builders for writing.
JsonArray json_array_f32(std::vector<int64_t> shape, const std::vector<float>& values);
JsonArray json_array_f64(std::vector<int64_t> shape, const std::vector<double>& values);
JsonArray json_array_i32(std::vector<int64_t> shape, const std::vector<int32_t>& values);
JsonArray json_array_i64(std::vector<int64_t> shape, const std::vector<int64_t>& values);

// Writes a document (arrays in the given order). Fails on an array whose data length does not
// match its shape, or when the file cannot be written.
Status write_profile_json(const std::string& path, const ProfileJsonDoc& doc,
                          const std::vector<std::pair<std::string, JsonArray>>& arrays);

// "[1, 36, 8]" for messages.
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace tangram
