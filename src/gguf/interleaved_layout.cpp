// The inverse of the kernels' interleave_rows: one row of an interleaved group back in ggml's
// row-major bytes, read field by field from the structs that state the layout.
#include "gguf/interleaved_layout.h"

#include <cstring>

namespace tangram {

namespace {

// ggml's row-major blocks, byte by byte (ggml-common.h): Q8_0 is an fp16 scale and 32 int8
// codes; Q4_K is fp16 d, fp16 dmin, the eight 6-bit scales and mins in 12 bytes, and 128 bytes
// of codes, sub-block j in the low (j even) or high (j odd) nibbles of bytes 32 (j / 2) ...
constexpr size_t kQ8_0RowBlockBytes = 34;
constexpr size_t kQ4_KRowBlockBytes = 144;

// ggml's 12-byte packing of eight 6-bit scales sc[] and mins mn[] (get_scale_min_k4 reads it).
void pack_q4_k_scales(const uint8_t (&sc)[8], const uint8_t (&mn)[8], uint8_t* out) {
  for (int j = 0; j < 4; ++j) {
    out[j] = static_cast<uint8_t>(sc[j] | (sc[j + 4] >> 4) << 6);
    out[j + 4] = static_cast<uint8_t>(mn[j] | (mn[j + 4] >> 4) << 6);
    out[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0F) | (mn[j + 4] & 0x0F) << 4);
  }
}

}  // namespace

void deinterleave_row(const InterleavedQ8_0* group, int64_t cols, int r, uint8_t* dst) {
  for (int64_t b = 0; b < cols / InterleavedQ8_0::kBlockElems; ++b) {
    const InterleavedQ8_0& x = group[b];
    uint8_t* out = dst + static_cast<size_t>(b) * kQ8_0RowBlockBytes;
    std::memcpy(out, &x.d[r], sizeof(x.d[r]));
    for (int k = 0; k < InterleavedQ8_0::kBlockElems; ++k)  // stored plus 128: back to int8
      out[2 + k] = static_cast<uint8_t>(x.qs[k / 4][4 * r + k % 4] ^ 0x80);
  }
}

void deinterleave_row(const InterleavedQ4_K* group, int64_t cols, int r, uint8_t* dst) {
  for (int64_t b = 0; b < cols / InterleavedQ4_K::kBlockElems; ++b) {
    const InterleavedQ4_K& x = group[b];
    uint8_t* out = dst + static_cast<size_t>(b) * kQ4_KRowBlockBytes;
    std::memcpy(out, &x.d[r], sizeof(x.d[r]));
    std::memcpy(out + 2, &x.dmin[r], sizeof(x.dmin[r]));
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; ++j) {
      sc[j] = static_cast<uint8_t>(interleaved_q4_k_scale(x, j, r));
      mn[j] = static_cast<uint8_t>(interleaved_q4_k_min(x, j, r));
    }
    pack_q4_k_scales(sc, mn, out + 4);
    uint8_t* qs = out + 16;
    std::memset(qs, 0, 128);
    for (int j = 0; j < 8; ++j)
      for (int e = 0; e < 32; ++e)
        qs[32 * (j / 2) + e] = static_cast<uint8_t>(
            qs[32 * (j / 2) + e] | interleaved_q4_k_code(x, j, e, r) << (4 * (j % 2)));
  }
}

}  // namespace tangram
