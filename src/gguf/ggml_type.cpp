#include "gguf/ggml_type.h"

#include <array>
#include <cctype>

namespace tangram {
namespace {

constexpr std::array<GgmlTypeInfo, 8> kTypes = {{
    {GgmlType::F32, "F32", 1, 4},
    {GgmlType::F16, "F16", 1, 2},
    {GgmlType::Q4_0, "Q4_0", 32, 18},
    {GgmlType::Q8_0, "Q8_0", 32, 34},
    {GgmlType::Q4_K, "Q4_K", 256, 144},
    {GgmlType::Q6_K, "Q6_K", 256, 210},
    {GgmlType::Q8_K, "Q8_K", 256, 292},
    {GgmlType::BF16, "BF16", 1, 2},
}};

}  // namespace

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == id) return t;
  return std::nullopt;
}

GgmlTypeInfo ggml_type_info(GgmlType t) { return *ggml_type_info(static_cast<uint32_t>(t)); }

std::string_view ggml_type_name(GgmlType t) { return ggml_type_info(t).name; }

std::optional<GgmlType> ggml_type_from_name(std::string_view name) {
  for (const auto& t : kTypes) {
    if (t.name.size() != name.size()) continue;
    bool eq = true;
    for (size_t i = 0; i < name.size(); ++i)
      if (std::toupper(static_cast<unsigned char>(name[i])) != t.name[i]) eq = false;
    if (eq) return t.type;
  }
  return std::nullopt;
}

size_t ggml_row_bytes(GgmlType t, int64_t n) {
  const auto info = ggml_type_info(t);
  return static_cast<size_t>(n / info.block_elems) * info.block_bytes;
}

}  // namespace tangram
