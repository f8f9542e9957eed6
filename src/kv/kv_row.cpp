#include "kv/kv_row.h"

#include "kernels/quant.h"

namespace tangram {

std::string_view kv_type_name(KvType t) {
  switch (t) {
    case KvType::F32:
      return "f32";
    case KvType::F16:
      return "f16";
    case KvType::Q8_0:
      return "q8_0";
  }
  return "?";
}

std::optional<KvType> parse_kv_type(std::string_view name) {
  for (const KvType t : {KvType::F32, KvType::F16, KvType::Q8_0})
    if (kv_type_name(t) == name) return t;
  return std::nullopt;
}

GgmlType kv_ggml_type(KvType type) {
  switch (type) {
    case KvType::F32:
      return GgmlType::F32;
    case KvType::F16:
      return GgmlType::F16;
    case KvType::Q8_0:
      return GgmlType::Q8_0;
  }
  return GgmlType::F32;
}

size_t kv_row_bytes(KvType type, int64_t dim) { return ggml_row_bytes(kv_ggml_type(type), dim); }

Status check_kv_row_dims(KvType type, int head_dim, int head_dim_v) {
  if (type == KvType::Q8_0 && (head_dim % kKvQ8Block != 0 || head_dim_v % kKvQ8Block != 0))
    return make_error(
        "KV type q8_0 stores rows in blocks of {} elements; this model's head sizes "
        "({} keys, {} values) are not multiples of {} (use --kv-type f16)",
        kKvQ8Block, head_dim, head_dim_v, kKvQ8Block);
  return Status::Ok();
}

void store_kv_row(KvType type, const float* src, uint8_t* dst, int64_t dim) {
  quantize_row(kv_ggml_type(type), src, dst, dim);
}

void load_kv_row(KvType type, const uint8_t* src, float* dst, int64_t dim) {
  dequantize_row(kv_ggml_type(type), src, dst, dim);
}

}  // namespace tangram
