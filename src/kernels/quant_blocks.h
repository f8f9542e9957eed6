// Internal: the byte layouts of the ggml block types, as C++ structs with their sizes checked.
// All multi-byte fields are little-endian (the only byte order GGUF files use in practice).
#pragma once

#include <cstdint>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace tangram::blocks {

constexpr int kQK0 = 32;   // elements per Q4_0 / Q8_0 block
constexpr int kQKK = 256;  // elements per K-quant super-block

// Q4_0: x = (q - 8) * d. qs[j] holds element j in its low nibble and element j + 16 in its
// high nibble.
struct BlockQ4_0 {
  uint16_t d;            // fp16 scale
  uint8_t qs[kQK0 / 2];  // 32 x 4-bit
};

// Q8_0: x = q * d.
struct BlockQ8_0 {
  uint16_t d;       // fp16 scale
  int8_t qs[kQK0];  // 32 x int8
};

// Q4_K: 8 sub-blocks of 32; x = d * sc[j] * q - dmin * m[j] with 6-bit sc/m packed in
// `scales` (see q4k_scale_min). Each 32-byte group of qs holds 64 elements: the low nibbles
// are elements [64g, 64g+32), the high nibbles [64g+32, 64g+64).
struct BlockQ4_K {
  uint16_t d;            // fp16 super-scale of the sub-block scales
  uint16_t dmin;         // fp16 super-scale of the sub-block mins
  uint8_t scales[12];    // 8 x (6-bit scale, 6-bit min)
  uint8_t qs[kQKK / 2];  // 256 x 4-bit
};

// Q6_K: 16 sub-blocks of 16; x = d * scales[e / 16] * (q - 32), q six bits: the low four in
// ql, the high two in qh (layout in quant_k.cpp).
struct BlockQ6_K {
  uint8_t ql[kQKK / 2];  // low 4 bits
  uint8_t qh[kQKK / 4];  // high 2 bits
  int8_t scales[kQKK / 16];
  uint16_t d;  // fp16 super-scale
};

// Q8_K (activations only): x = q * d; bsums[i] = sum of qs[16i .. 16i+16).
struct BlockQ8_K {
  float d;
  int8_t qs[kQKK];
  int16_t bsums[kQKK / 16];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

// Unpacks the 6-bit scale and min of sub-block j (0..7) from BlockQ4_K::scales: sub-blocks
// 0..3 keep theirs in the low 6 bits of bytes j and j+4; sub-blocks 4..7 keep the low 4 bits in
// byte j+4 (scale: low nibble, min: high nibble) and the high 2 bits in the top bits of bytes
// j-4 (scale) and j (min).
inline void q4k_scale_min(const uint8_t* s, int j, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = static_cast<uint8_t>(s[j] & 63);
    *m = static_cast<uint8_t>(s[j + 4] & 63);
  } else {
    *sc = static_cast<uint8_t>((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

#if defined(__AVX2__)
// All eight 6-bit scales and mins of a Q4_K block at once, as bytes [sc0..sc7, m0..m7], from
// the same layout. Reads 16 bytes at s (the 12 scale bytes and 4 code bytes that follow them
// in the block; the extra bytes are ignored). Works on 32-bit words u0,u1,u2 = bytes 0-3,
// 4-7, 8-11: sc0-3 = u0 & 0x3F.., m0-3 = u1 & 0x3F.., sc4-7 = (u2 & 0x0F..) | (u0 >> 2 & 0x30..),
// m4-7 = (u2 >> 4 & 0x0F..) | (u1 >> 2 & 0x30..).
inline __m128i q4k_scales_mins(const uint8_t* s) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
  const __m128i x = _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0));  // u0 u2 u1 u2
  const __m128i y = _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0));  // u0 u0 u1 u1
  const __m128i lo = _mm_and_si128(x, _mm_set1_epi32(0x3F3F3F3F));
  const __m128i hi = _mm_or_si128(
      _mm_and_si128(_mm_srlv_epi32(x, _mm_setr_epi32(0, 0, 0, 4)), _mm_set1_epi32(0x0F0F0F0F)),
      _mm_and_si128(_mm_srli_epi32(y, 2), _mm_set1_epi32(0x30303030)));
  return _mm_blend_epi32(lo, hi, 0b1010);
}
#endif

}  // namespace tangram::blocks
