#include "kernels/interleaved_q4_k.h"

#include <cstring>

#include "kernels/half.h"
#include "kernels/quant_blocks.h"
#include "kernels/vec_dot_avx512.h"

namespace tangram::vec {

using blocks::BlockQ4_K;
using blocks::BlockQ8_K;
using blocks::kQKK;

namespace {

// Code of element e (0..255) of a Q4_K block.
uint8_t q4_k_code(const BlockQ4_K& b, int e) {
  const int g = e / 64, i = e % 64;
  const uint8_t byte = b.qs[32 * g + i % 32];
  return static_cast<uint8_t>(i < 32 ? byte & 0x0F : byte >> 4);
}

}  // namespace

void interleave_q4_k(const uint8_t* w, size_t w_stride, int nr, int64_t cols, InterleavedQ4_K* dst) {
  const int64_t nblocks = cols / kQKK;
  for (int64_t b = 0; b < nblocks; ++b) {
    InterleavedQ4_K& out = dst[b];
    std::memset(&out, 0, sizeof(out));
    for (int r = 0; r < nr; ++r) {
      const BlockQ4_K& x = reinterpret_cast<const BlockQ4_K*>(w + static_cast<size_t>(r) * w_stride)[b];
      out.d[r] = half::fp16_to_fp32(x.d);
      out.dmin[r] = half::fp16_to_fp32(x.dmin);
      for (int j = 0; j < 8; ++j) {
        uint8_t sc = 0, m = 0;
        blocks::q4k_scale_min(x.scales, j, &sc, &m);
        out.scales[j][r] = sc;
        out.mins[j / 2][2 * r + j % 2] = m;
        for (int s = 0; s < 4; ++s)
          for (int i = 0; i < 4; ++i) {
            const int e = 32 * j + 8 * s + i;
            out.qs[j][s][4 * r + i] = static_cast<uint8_t>(q4_k_code(x, e) | (q4_k_code(x, e + 4) << 4));
          }
      }
    }
  }
}

void q8_k_pair_sums(const uint8_t* act, int64_t cols, int32_t* dst) {
  const auto* a = reinterpret_cast<const BlockQ8_K*>(act);
  for (int64_t b = 0; b < cols / kQKK; ++b)
    for (int p = 0; p < 4; ++p) {
      const int16_t* s = a[b].bsums + 4 * p;
      // Each sub-block sum is at most 32 * 128 in magnitude: it fits int16.
      const auto even = static_cast<uint16_t>(s[0] + s[1]), odd = static_cast<uint16_t>(s[2] + s[3]);
      dst[4 * b + p] = static_cast<int32_t>(static_cast<uint32_t>(even) | (static_cast<uint32_t>(odd) << 16));
    }
}

void gemm_interleaved_q4_k_portable(const InterleavedQ4_K* w, int64_t nblocks, const uint8_t* act, size_t act_stride,
                                    const int32_t* pair_sums, size_t pair_stride, int nt, float* out,
                                    size_t out_stride) {
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

InterleavedGemmFn gemm_interleaved_q4_k_fn(cpu::KernelLevel level) {
  switch (level) {
    case cpu::KernelLevel::Avx512Vnni: return avx512::gemm_interleaved_q4_k;
    case cpu::KernelLevel::Avx2: return nullptr;
  }
  return nullptr;
}

}  // namespace tangram::vec
