// Dequantisation of hand-built blocks: the bytes are written out here, and the expected values
// are computed in the test straight from the ggml format definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/quant.h"
#include "kernels/quant_internal.h"

namespace tangram {
namespace {

std::vector<float> dequant(GgmlType t, const std::vector<uint8_t>& bytes, int64_t n) {
  EXPECT_EQ(bytes.size(), ggml_row_bytes(t, n));
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(t, bytes.data(), out.data(), n);
  return out;
}

TEST(DequantBlocks, F32AndF16AndBf16) {
  const float f[3] = {1.5f, -0.25f, 1e-30f};
  std::vector<uint8_t> b(sizeof f);
  std::memcpy(b.data(), f, sizeof f);
  const auto y = dequant(GgmlType::F32, b, 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(y[i], f[i]);

  // fp16 little-endian: 1.0 (0x3C00), -2.0 (0xC000), 65504 (0x7BFF), 2^-24 (0x0001),
  // 0.333251953125 (0x3555), -0.0 (0x8000), 2^-14 (0x0400), 0.5 (0x3800), and 8 more ones
  // so the SIMD width is exercised.
  std::vector<uint8_t> h = {0x00, 0x3C, 0x00, 0xC0, 0xFF, 0x7B, 0x01, 0x00,
                            0x55, 0x35, 0x00, 0x80, 0x00, 0x04, 0x00, 0x38};
  for (int i = 0; i < 8; ++i) h.insert(h.end(), {0x00, 0x3C});
  const auto yh = dequant(GgmlType::F16, h, 16);
  const float eh[8] = {
      1.0f, -2.0f, 65504.0f, std::ldexp(1.0f, -24), 0.333251953125f, -0.0f, std::ldexp(1.0f, -14),
      0.5f};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(yh[i], eh[i]) << i;
  for (int i = 8; i < 16; ++i) EXPECT_EQ(yh[i], 1.0f);

  // bf16: 1.0 (0x3F80), -3.0 (0xC040), 3.140625 (0x4049).
  const std::vector<uint8_t> bf = {0x80, 0x3F, 0x40, 0xC0, 0x49, 0x40};
  const auto yb = dequant(GgmlType::BF16, bf, 3);
  EXPECT_EQ(yb[0], 1.0f);
  EXPECT_EQ(yb[1], -3.0f);
  EXPECT_EQ(yb[2], 3.140625f);
}

TEST(DequantBlocks, Q4_0) {
  // d = 0.5 (fp16 0x3800); byte j = (j) | ((15 - j) << 4): element j has code j, element j+16
  // code 15-j; value = (code - 8) * d.
  std::vector<uint8_t> b = {0x00, 0x38};
  for (int j = 0; j < 16; ++j) b.push_back(static_cast<uint8_t>(j | ((15 - j) << 4)));
  const auto y = dequant(GgmlType::Q4_0, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], static_cast<float>(j - 8) * 0.5f) << j;
    EXPECT_EQ(y[j + 16], static_cast<float>((15 - j) - 8) * 0.5f) << j;
  }
}

TEST(DequantBlocks, Q8_0TwoBlocks) {
  // Block 0: d = 0.25 (0x3400), q_j = 8j - 128. Block 1: d = -2 (0xC000), q_j = 127 - j.
  std::vector<uint8_t> b = {0x00, 0x34};
  for (int j = 0; j < 32; ++j) b.push_back(static_cast<uint8_t>(static_cast<int8_t>(8 * j - 128)));
  b.insert(b.end(), {0x00, 0xC0});
  for (int j = 0; j < 32; ++j) b.push_back(static_cast<uint8_t>(127 - j));
  const auto y = dequant(GgmlType::Q8_0, b, 64);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(y[j], static_cast<float>(8 * j - 128) * 0.25f) << j;
    EXPECT_EQ(y[32 + j], static_cast<float>(127 - j) * -2.0f) << j;
  }
}

TEST(DequantBlocks, Q4_K) {
  // d = 1.0 (0x3C00), dmin = 0.5 (0x3800). Sub-block scales and mins (6 bits each):
  const int sc[8] = {1, 2, 3, 4, 33, 40, 63, 17};
  const int mn[8] = {0, 5, 10, 63, 20, 1, 48, 35};
  // Packed by hand per the format: bytes 0-3 = sc[j] | (sc[j+4] >> 4) << 6,
  // bytes 4-7 = mn[j] | (mn[j+4] >> 4) << 6, bytes 8-11 = (sc[j+4] & 15) | (mn[j+4] & 15) << 4.
  std::vector<uint8_t> b = {0x00, 0x3C, 0x00, 0x38,                          // d, dmin
                            0x81, 0x82, 0xC3, 0x44, 0x40, 0x05, 0xCA, 0xBF,  // scales 0-7
                            0x41, 0x18, 0x0F, 0x31};                         // scales 8-11
  // 128 bytes of codes: byte i holds element 64(i/32) + i%32 (low nibble) and that + 32 (high).
  for (int i = 0; i < 128; ++i)
    b.push_back(static_cast<uint8_t>(((i * 7 + 3) & 15) | (((i * 5 + 1) & 15) << 4)));
  ASSERT_EQ(b.size(), 144u);
  const auto y = dequant(GgmlType::Q4_K, b, 256);
  for (int i = 0; i < 128; ++i) {
    const int g = i / 32, l = i % 32;
    const int lo = (i * 7 + 3) & 15, hi = (i * 5 + 1) & 15;
    const int e_lo = 64 * g + l, e_hi = 64 * g + 32 + l;
    // x = d * sc[sub] * q - dmin * m[sub], sub = element / 32.
    EXPECT_EQ(y[e_lo], 1.0f * static_cast<float>(sc[e_lo / 32] * lo) -
                           0.5f * static_cast<float>(mn[e_lo / 32]))
        << e_lo;
    EXPECT_EQ(y[e_hi], 1.0f * static_cast<float>(sc[e_hi / 32] * hi) -
                           0.5f * static_cast<float>(mn[e_hi / 32]))
        << e_hi;
  }
}

TEST(DequantBlocks, Q6_K) {
  // ql[128], qh[64], scales[16] (int8), d (fp16 0.5 = 0x3800).
  const int8_t scales[16] = {1, -2, 3, -4, 5, -6, 7, -8, 127, -128, 10, -10, 20, -20, 64, -1};
  std::vector<uint8_t> b;
  for (int i = 0; i < 128; ++i) b.push_back(static_cast<uint8_t>((i * 37 + 11) & 0xFF));  // ql
  for (int i = 0; i < 64; ++i) b.push_back(static_cast<uint8_t>((i * 91 + 5) & 0xFF));    // qh
  for (int k = 0; k < 16; ++k) b.push_back(static_cast<uint8_t>(scales[k]));
  b.insert(b.end(), {0x00, 0x38});
  ASSERT_EQ(b.size(), 210u);
  const auto y = dequant(GgmlType::Q6_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    // Element e = 128h + 32c + l: low 4 bits from ql[64h + 32(c%2) + l] (low nibble for c < 2,
    // high nibble otherwise), high 2 bits from qh[32h + l] bits 2c..2c+1; code - 32.
    const int h = e / 128, c = (e % 128) / 32, l = e % 32;
    const int qlb = b[static_cast<size_t>(64 * h + 32 * (c % 2) + l)];
    const int low = c < 2 ? (qlb & 15) : (qlb >> 4);
    const int high = (b[static_cast<size_t>(128 + 32 * h + l)] >> (2 * c)) & 3;
    const int q = (low | (high << 4)) - 32;
    EXPECT_EQ(y[e], 0.5f * static_cast<float>(scales[e / 16] * q)) << e;
  }
}

TEST(DequantBlocks, Q8_K) {
  // d = 0.125 as little-endian float (0x3E000000), 256 int8 codes, 16 int16 sums (unused by
  // dequantisation but part of the block).
  std::vector<uint8_t> b = {0x00, 0x00, 0x00, 0x3E};
  for (int i = 0; i < 256; ++i)
    b.push_back(static_cast<uint8_t>(static_cast<int8_t>((i * 37) % 255 - 127)));
  b.resize(292, 0);
  const auto y = dequant(GgmlType::Q8_K, b, 256);
  for (int i = 0; i < 256; ++i)
    EXPECT_EQ(y[i], static_cast<float>((i * 37) % 255 - 127) * 0.125f) << i;
}

// The vectorised dequantisers against the portable ones on random block bytes (scale fields
// forced to finite fp16 values). Both compute code * scale (- min) in float: results match
// exactly except where the SIMD path fuses the Q4_K multiply-subtract (1 ulp of the terms).
TEST(DequantBlocks, SimdMatchesPortableOnRandomBlocks) {
  std::mt19937 rng(42);
  struct Case {
    GgmlType type;
    void (*portable)(const void*, float*, int64_t);
    std::vector<size_t> fp16_fields;  // byte offsets of fp16 scales within a block
  };
  const Case cases[] = {{GgmlType::Q4_0, quant::dequantize_row_q4_0_portable, {0}},
                        {GgmlType::Q8_0, quant::dequantize_row_q8_0_portable, {0}},
                        {GgmlType::Q4_K, quant::dequantize_row_q4_k_portable, {0, 2}},
                        {GgmlType::Q6_K, quant::dequantize_row_q6_k_portable, {208}}};
  for (const Case& c : cases) {
    const int64_t n = 1024;
    const auto info = ggml_type_info(c.type);
    std::vector<uint8_t> bytes(ggml_row_bytes(c.type, n));
    for (auto& v : bytes) v = static_cast<uint8_t>(rng());
    for (size_t blk = 0; blk < bytes.size() / info.block_bytes; ++blk)
      for (const size_t off : c.fp16_fields) {
        const uint16_t h = fp32_to_fp16(std::ldexp(static_cast<float>(rng() % 1000 + 1), -12));
        std::memcpy(bytes.data() + blk * info.block_bytes + off, &h, 2);
      }
    std::vector<float> simd(n), portable(n);
    dequantize_row(c.type, bytes.data(), simd.data(), n);
    c.portable(bytes.data(), portable.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(simd[i], portable[i], 1e-6f * (std::fabs(portable[i]) + 1.0f))
          << ggml_type_name(c.type) << " " << i;
  }
}

}  // namespace
}  // namespace tangram
