// Internal: inline fp16/bf16 <-> fp32 conversions for the hot loops. F16C does fp16 in one
// instruction where the build enables it; the portable versions are always compiled so tests
// can compare the two.
#pragma once

#include <bit>
#include <cstdint>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace tangram::half {

// IEEE binary16 -> binary32, exact (every half is a float), subnormals and NaN payloads kept.
inline float fp16_to_fp32_portable(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1F) {  // inf / NaN
    bits = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {  // normal
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {  // signed zero
    bits = sign;
  } else {             // subnormal: renormalise
    uint32_t e = 113;  // exponent of 2^-14 biased for float, minus the shifts below
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    bits = sign | (e << 23) | ((mant & 0x3FFu) << 13);
  }
  return std::bit_cast<float>(bits);
}

// binary32 -> binary16 with round-to-nearest-even; overflow gives inf, NaN stays NaN.
inline uint16_t fp32_to_fp16_portable(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) {  // inf or NaN (keep NaN quiet and non-zero)
    const uint32_t nan = abs > 0x7F800000u ? (0x200u | ((abs >> 13) & 0x3FFu)) : 0u;
    return static_cast<uint16_t>(sign | 0x7C00u | nan);
  }
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to >= 65520
  if (abs >= 0x38800000u) {  // result is a normal half (|f| >= 2^-14)
    const uint32_t rounded = abs + 0xFFFu + ((abs >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
  // Subnormal half: value = mant * 2^-24. Shift the full significand and round to even.
  const uint32_t e = abs >> 23;  // biased float exponent, 102..112
  const uint32_t m = (abs & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14..24
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1u);
  if (rem > halfway || (rem == halfway && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

inline float fp16_to_fp32(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  return fp16_to_fp32_portable(h);
#endif
}

inline uint16_t fp32_to_fp16(float f) {
#if defined(__F16C__)
  // _cvtss_sh spelled out: clang's macro for it is a C99 compound literal (-Wpedantic).
  return static_cast<uint16_t>(
      _mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0));
#else
  return fp32_to_fp16_portable(f);
#endif
}

inline float bf16_to_fp32(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

inline uint16_t fp32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u)
    return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace tangram::half
