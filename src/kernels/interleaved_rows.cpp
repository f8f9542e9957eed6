#include "kernels/interleaved_rows.h"

#include <immintrin.h>

#include <cstring>

#include "kernels/half.h"
#include "kernels/quant_blocks.h"
#include "kernels/vec_dot_avx512.h"

namespace tangram::vec {

using blocks::BlockQ4_K;
using blocks::BlockQ8_0;
using blocks::BlockQ8_K;
using blocks::kQK0;
using blocks::kQKK;

namespace {

// Row r's 256 codes of block x into the interleaved layout. Within 16 codes of a sub-block,
// one shuffle puts quads 0 and 2 in bytes 0-7 and quads 1 and 3 in bytes 8-15; or-ing the
// second half, shifted up a nibble, onto the first gives the bytes of two 8-element steps.
void interleave_codes(const BlockQ4_K& x, int r, InterleavedQ4_K& out) {
  const __m128i quads = _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15);
  const __m128i low4 = _mm_set1_epi8(0x0F);
  for (int g = 0; g < 4; ++g)      // 32 bytes of qs: sub-blocks 2g (low nibbles), 2g + 1 (high)
    for (int h = 0; h < 2; ++h) {  // elements 16h .. 16h + 15 of both sub-blocks
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.qs + 32 * g + 16 * h));
      const __m128i codes[2] = {_mm_and_si128(v, low4), _mm_and_si128(_mm_srli_epi16(v, 4), low4)};
      for (int k = 0; k < 2; ++k) {
        const __m128i q = _mm_shuffle_epi8(codes[k], quads);
        const __m128i packed = _mm_or_si128(q, _mm_slli_epi16(_mm_srli_si128(q, 8), 4));
        const auto steps = static_cast<uint64_t>(_mm_cvtsi128_si64(packed));  // steps 2h, 2h + 1
        const auto first = static_cast<uint32_t>(steps), second = static_cast<uint32_t>(steps >> 32);
        std::memcpy(out.qs[2 * g + k][2 * h] + 4 * r, &first, 4);
        std::memcpy(out.qs[2 * g + k][2 * h + 1] + 4 * r, &second, 4);
      }
    }
}

}  // namespace

void interleave_rows(const uint8_t* w, size_t w_stride, int nr, int64_t cols, InterleavedQ4_K* dst) {
  const int64_t nblocks = cols / kQKK;
  for (int64_t b = 0; b < nblocks; ++b) {
    InterleavedQ4_K& out = dst[b];
    if (nr < kInterleavedRows) std::memset(&out, 0, sizeof(out));  // rows past the end: zero
    for (int r = 0; r < nr; ++r) {
      const BlockQ4_K& x = reinterpret_cast<const BlockQ4_K*>(w + static_cast<size_t>(r) * w_stride)[b];
      out.d[r] = half::fp16_to_fp32(x.d);
      out.dmin[r] = half::fp16_to_fp32(x.dmin);
      alignas(16) uint8_t scales_mins[16];  // [sc0..sc7, m0..m7]
      _mm_store_si128(reinterpret_cast<__m128i*>(scales_mins), blocks::q4k_scales_mins(x.scales));
      for (int j = 0; j < 8; ++j) {
        out.scales[j][r] = scales_mins[j];
        out.mins[j / 2][2 * r + j % 2] = scales_mins[8 + j];
      }
      interleave_codes(x, r, out);
    }
  }
}

void activation_sums(const uint8_t* act, int64_t cols, const InterleavedQ4_K*, int32_t* dst) {
  const auto* a = reinterpret_cast<const BlockQ8_K*>(act);
  for (int64_t b = 0; b < cols / kQKK; ++b)
    for (int p = 0; p < 4; ++p) {
      const int16_t* s = a[b].bsums + 4 * p;
      // Each sub-block sum is at most 32 * 128 in magnitude: it fits int16.
      const auto even = static_cast<uint16_t>(s[0] + s[1]), odd = static_cast<uint16_t>(s[2] + s[3]);
      dst[4 * b + p] = static_cast<int32_t>(static_cast<uint32_t>(even) | (static_cast<uint32_t>(odd) << 16));
    }
}

void gemm_interleaved_portable(const InterleavedQ4_K* w, int64_t nblocks, const uint8_t* act, size_t act_stride,
                               const int32_t* pair_sums, size_t pair_stride, int nt, float* out, size_t out_stride) {
  for (int t = 0; t < nt; ++t) {
    const auto* a = reinterpret_cast<const BlockQ8_K*>(act + static_cast<size_t>(t) * act_stride);
    const int32_t* sums = pair_sums + static_cast<size_t>(t) * pair_stride;
    for (int r = 0; r < kInterleavedRows; ++r) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nblocks; ++b) {
        const InterleavedQ4_K& x = w[b];
        int32_t scaled = 0, mins = 0;
        for (int j = 0; j < 8; ++j) {
          int32_t isum = 0;
          for (int s = 0; s < 4; ++s)
            for (int i = 0; i < 4; ++i) {
              const uint8_t q = x.qs[j][s][4 * r + i];
              isum += (q & 0x0F) * a[b].qs[32 * j + 8 * s + i] + (q >> 4) * a[b].qs[32 * j + 8 * s + 4 + i];
            }
          scaled += isum * x.scales[j][r];
          const int32_t pair = sums[4 * b + j / 2];
          const auto half_sum = static_cast<int16_t>(j % 2 == 0 ? pair & 0xFFFF : (pair >> 16) & 0xFFFF);
          mins += x.mins[j / 2][2 * r + j % 2] * half_sum;
        }
        acc += a[b].d * (x.d[r] * static_cast<float>(scaled) - x.dmin[r] * static_cast<float>(mins));
      }
      out[static_cast<size_t>(t) * out_stride + static_cast<size_t>(r)] = acc;
    }
  }
}

void interleave_rows(const uint8_t* w, size_t w_stride, int nr, int64_t cols, InterleavedQ8_0* dst) {
  const int64_t nblocks = cols / kQK0;
  for (int64_t b = 0; b < nblocks; ++b) {
    InterleavedQ8_0& out = dst[b];
    if (nr < kInterleavedRows) std::memset(&out, 0, sizeof(out));  // rows past the end: zero
    for (int r = 0; r < nr; ++r) {
      const BlockQ8_0& x = reinterpret_cast<const BlockQ8_0*>(w + static_cast<size_t>(r) * w_stride)[b];
      out.d[r] = half::fp16_to_fp32(x.d);
      for (int s = 0; s < 8; ++s) {
        uint32_t four;
        std::memcpy(&four, x.qs + 4 * s, 4);
        four ^= 0x80808080u;  // int8 -> uint8 + 128
        std::memcpy(out.qs[s] + 4 * r, &four, 4);
      }
    }
  }
}

void activation_sums(const uint8_t* act, int64_t cols, const InterleavedQ8_0*, int32_t* dst) {
  const auto* a = reinterpret_cast<const BlockQ8_0*>(act);
  for (int64_t b = 0; b < cols / kQK0; ++b) {
    int32_t sum = 0;
    for (const int8_t q : a[b].qs) sum += q;
    dst[b] = -128 * sum;
  }
}

void gemm_interleaved_portable(const InterleavedQ8_0* w, int64_t nblocks, const uint8_t* act, size_t act_stride,
                               const int32_t* sums, size_t sums_stride, int nt, float* out, size_t out_stride) {
  for (int t = 0; t < nt; ++t) {
    const auto* a = reinterpret_cast<const BlockQ8_0*>(act + static_cast<size_t>(t) * act_stride);
    const int32_t* offsets = sums + static_cast<size_t>(t) * sums_stride;
    for (int r = 0; r < kInterleavedRows; ++r) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nblocks; ++b) {
        int32_t isum = offsets[b];
        for (int s = 0; s < 8; ++s)
          for (int i = 0; i < 4; ++i) isum += w[b].qs[s][4 * r + i] * a[b].qs[4 * s + i];
        acc += w[b].d[r] * half::fp16_to_fp32(a[b].d) * static_cast<float>(isum);
      }
      out[static_cast<size_t>(t) * out_stride + static_cast<size_t>(r)] = acc;
    }
  }
}

InterleavedGemmFn<InterleavedQ4_K> gemm_interleaved_q4_k_fn(cpu::KernelLevel level) {
  switch (level) {
    case cpu::KernelLevel::Avx512Vnni: return avx512::gemm_interleaved_q4_k;
    case cpu::KernelLevel::Avx2: return nullptr;
  }
  return nullptr;
}

InterleavedGemmFn<InterleavedQ8_0> gemm_interleaved_q8_0_fn(cpu::KernelLevel level) {
  switch (level) {
    case cpu::KernelLevel::Avx512Vnni: return avx512::gemm_interleaved_q8_0;
    case cpu::KernelLevel::Avx2: return nullptr;
  }
  return nullptr;
}

}  // namespace tangram::vec
