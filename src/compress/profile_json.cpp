#include "compress/profile_json.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/file_text.h"
#include "common/json_parse.h"

namespace tangram {
namespace {

using json = nlohmann::json;

// Larger arrays are not plausible for per-head statistics and would only come from a corrupt file.
constexpr int64_t kMaxElements = int64_t{1} << 28;
// Integers up to 2^53 survive the trip through double.
constexpr double kMaxExactInteger = 9007199254740992.0;

bool is_known_dtype(std::string_view d) {
  return d == "float32" || d == "float64" || d == "int32" || d == "int64";
}

bool is_integer_dtype(std::string_view d) { return d == "int32" || d == "int64"; }

// One element of `data` as double, or an error text.
Result<double> element_value(const json& v, std::string_view dtype) {
  if (v.is_null()) {
    if (is_integer_dtype(dtype)) return make_error("null in an integer array");
    return std::numeric_limits<double>::quiet_NaN();  // the format marks NaN/Inf with null
  }
  if (!v.is_number()) return make_error("a non-number ({})", v.type_name());
  if (!is_integer_dtype(dtype)) return v.get<double>();
  double x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (static_cast<double>(u) > kMaxExactInteger) return make_error("integer {} is too large", u);
    x = static_cast<double>(u);
  } else if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (std::fabs(static_cast<double>(i)) > kMaxExactInteger)
      return make_error("integer {} is too large", i);
    x = static_cast<double>(i);
  } else {
    x = v.get<double>();
    if (!std::isfinite(x) || x != std::floor(x)) return make_error("non-integer {}", x);
  }
  const bool fits = dtype == "int32" ? (x >= -2147483648.0 && x <= 2147483647.0)
                                     : std::fabs(x) <= kMaxExactInteger;
  if (!fits) return make_error("{} is out of the {} range", x, dtype);
  return x;
}

Result<JsonArray> parse_array(const json& j, const std::string& name, const std::string& path) {
  if (!j.is_object()) return make_error("{}: array '{}' is not an object", path, name);
  JsonArray a;
  const auto dt = j.find("dtype");
  if (dt == j.end() || !dt->is_string())
    return make_error("{}: array '{}' has no string 'dtype'", path, name);
  a.dtype = dt->get<std::string>();
  if (!is_known_dtype(a.dtype))
    return make_error("{}: array '{}' has unsupported dtype '{}' (float32, float64, int32, int64)",
                      path, name, a.dtype);
  const auto sh = j.find("shape");
  if (sh == j.end() || !sh->is_array())
    return make_error("{}: array '{}' has no 'shape' list", path, name);
  int64_t count = 1;
  for (const json& d : *sh) {
    if (!d.is_number_integer())
      return make_error("{}: array '{}' has a non-integer extent ({}) in its shape", path, name,
                        d.type_name());
    if (d.get<int64_t>() < 0 || d.get<int64_t>() > kMaxElements)
      return make_error("{}: array '{}' has a bad extent {} in its shape", path, name,
                        d.get<int64_t>());
    const int64_t e = d.get<int64_t>();
    a.shape.push_back(e);
    count = e == 0 ? 0 : count * e;
    if (count > kMaxElements)
      return make_error("{}: array '{}' is implausibly large ({} elements so far)", path, name,
                        count);
  }
  const auto data = j.find("data");
  if (data == j.end() || !data->is_array())
    return make_error("{}: array '{}' has no 'data' list", path, name);
  if (static_cast<int64_t>(data->size()) != count)
    return make_error("{}: array '{}' has shape {} ({} elements) but {} data values", path, name,
                      shape_string(a.shape), count, data->size());
  a.data.reserve(static_cast<size_t>(count));
  size_t i = 0;
  for (const json& v : *data) {
    auto x = element_value(v, a.dtype);
    if (!x)
      return make_error("{}: array '{}' ({}) element {}: {}", path, name, a.dtype, i, x.message());
    a.data.push_back(*x);
    ++i;
  }
  return a;
}

std::string string_field(const json& root, const char* key) {
  const auto it = root.find(key);
  return it != root.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The value a float32 would print as (shortest round-trip digits), so written files stay
// small and readable instead of showing the float's full double expansion.
double float_as_short_double(float f) {
  if (!std::isfinite(f)) return std::numeric_limits<double>::quiet_NaN();
  double d = 0;
  const std::string s = fmt::format("{}", f);
  std::istringstream(s) >> d;
  return d;
}

json array_to_json(const JsonArray& a) {
  json data = json::array();
  const bool is_int = is_integer_dtype(a.dtype);
  for (double x : a.data) {
    if (is_int)
      data.push_back(static_cast<int64_t>(x));
    else if (std::isfinite(x))
      data.push_back(x);
    else
      data.push_back(nullptr);
  }
  return json{{"dtype", a.dtype}, {"shape", a.shape}, {"data", std::move(data)}};
}

int64_t shape_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

Result<const JsonArray*> ProfileJsonDoc::array(const std::string& array_name,
                                               std::string_view want_dtype,
                                               const std::vector<int64_t>& want_shape) const {
  const auto it = arrays.find(array_name);
  if (it == arrays.end()) return make_error("{}: missing array '{}'", path, array_name);
  const JsonArray& a = it->second;
  if (a.dtype != want_dtype)
    return make_error("{}: array '{}' has dtype {}, expected {}", path, array_name, a.dtype,
                      want_dtype);
  bool same = a.shape.size() == want_shape.size();
  for (size_t i = 0; same && i < want_shape.size(); ++i)
    same = want_shape[i] < 0 || want_shape[i] == a.shape[i];
  if (!same) {
    std::string want = "[";
    for (size_t i = 0; i < want_shape.size(); ++i)
      want +=
          (i ? ", " : "") + (want_shape[i] < 0 ? std::string("*") : std::to_string(want_shape[i]));
    return make_error("{}: array '{}' has shape {}, expected {}", path, array_name,
                      shape_string(a.shape), want + "]");
  }
  return &a;
}

Result<ProfileJsonDoc> read_profile_json(const std::string& path, std::string_view want_kind) {
  TG_ASSIGN(const std::string text, read_file_text(path, "the profile"));
  const json root = parse_json_or_discarded(text);
  if (root.is_discarded()) return make_error("{}: not valid JSON (truncated or corrupt?)", path);
  if (!root.is_object()) return make_error("{}: the top level is not a JSON object", path);
  const std::string format = string_field(root, "format");
  if (format != kProfileJsonFormat)
    return make_error("{}: format is '{}', expected '{}'", path, format, kProfileJsonFormat);
  ProfileJsonDoc doc;
  doc.path = path;
  doc.kind = string_field(root, "kind");
  if (doc.kind != want_kind)
    return make_error("{}: kind is '{}', expected '{}'", path, doc.kind, want_kind);
  doc.scorer = string_field(root, "scorer");
  doc.model = string_field(root, "model");
  doc.name = string_field(root, "name");
  if (const auto m = root.find("meta"); m != root.end()) {
    if (!m->is_object() && !m->is_null()) return make_error("{}: 'meta' is not an object", path);
    if (m->is_object()) doc.meta = *m;
  }
  const auto arrays = root.find("arrays");
  if (arrays == root.end() || !arrays->is_object())
    return make_error("{}: no 'arrays' object", path);
  for (const auto& [name, value] : arrays->items()) {
    TG_ASSIGN(JsonArray a, parse_array(value, name, path));
    doc.arrays.emplace(name, std::move(a));
  }
  return doc;
}

JsonArray json_array_f32(std::vector<int64_t> shape, const std::vector<float>& values) {
  JsonArray a{"float32", std::move(shape), {}};
  a.data.reserve(values.size());
  for (float v : values) a.data.push_back(float_as_short_double(v));
  return a;
}

JsonArray json_array_f64(std::vector<int64_t> shape, const std::vector<double>& values) {
  return JsonArray{"float64", std::move(shape), values};
}

JsonArray json_array_i32(std::vector<int64_t> shape, const std::vector<int32_t>& values) {
  JsonArray a{"int32", std::move(shape), {}};
  a.data.assign(values.begin(), values.end());
  return a;
}

JsonArray json_array_i64(std::vector<int64_t> shape, const std::vector<int64_t>& values) {
  JsonArray a{"int64", std::move(shape), {}};
  a.data.reserve(values.size());
  for (int64_t v : values) a.data.push_back(static_cast<double>(v));
  return a;
}

Status write_profile_json(const std::string& path, const ProfileJsonDoc& doc,
                          const std::vector<std::pair<std::string, JsonArray>>& arrays) {
  json root = json::object();
  root["format"] = kProfileJsonFormat;
  root["kind"] = doc.kind;
  root["scorer"] = doc.scorer;
  root["model"] = doc.model;
  root["name"] = doc.name;
  root["meta"] = doc.meta.is_object() ? doc.meta : json::object();
  json out_arrays = json::object();
  for (const auto& [name, a] : arrays) {
    if (shape_count(a.shape) != static_cast<int64_t>(a.data.size()))
      return make_error("{}: array '{}' has shape {} but {} values", path, name,
                        shape_string(a.shape), a.data.size());
    out_arrays[name] = array_to_json(a);
  }
  root["arrays"] = std::move(out_arrays);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return make_error("{}: cannot open the file for writing", path);
  // replace: a stray invalid UTF-8 byte in a name must not throw out of dump().
  out << root.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
  out.close();
  if (!out) return make_error("{}: write failed", path);
  return Status::Ok();
}

}  // namespace tangram
