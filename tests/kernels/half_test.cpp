// fp16 / bf16 conversions: hand-checked values, and the F16C path against the portable one.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/half.h"
#include "kernels/quant.h"

namespace tangram {
namespace {

TEST(Half, KnownFp16Values) {
  EXPECT_EQ(fp16_to_fp32(0x3C00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xC000), -2.0f);
  EXPECT_EQ(fp16_to_fp32(0x7BFF), 65504.0f);
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));     // smallest subnormal
  EXPECT_EQ(fp16_to_fp32(0x03FF), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(fp16_to_fp32(0x0400), std::ldexp(1.0f, -14));     // smallest normal
  EXPECT_EQ(fp16_to_fp32(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isinf(fp16_to_fp32(0x7C00)));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7E00)));
  EXPECT_TRUE(std::signbit(fp16_to_fp32(0x8000)));

  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xC000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65519.0f), 0x7BFF);  // below the halfway point to 65536
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);  // ties to even -> overflows to inf
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie -> even (down)
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie -> even (up)
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie between 0 and min subnormal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp tie -> even
}

TEST(Half, PortableMatchesHardwareForEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto hv = static_cast<uint16_t>(h);
    const float a = half::fp16_to_fp32_portable(hv);
    const float b = half::fp16_to_fp32(hv);
    if (std::isnan(a)) {
      EXPECT_TRUE(std::isnan(b)) << h;
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(a), std::bit_cast<uint32_t>(b)) << h;
    // And back: every half round-trips exactly.
    ASSERT_EQ(half::fp32_to_fp16_portable(a), hv) << h;
  }
}

TEST(Half, PortableFp32ToFp16MatchesHardware) {
  // Walk float bit patterns with a stride that visits every exponent and many mantissas,
  // including the subnormal-half and overflow ranges.
  for (uint64_t u = 0; u < 0x100000000ull; u += 4099) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(u));
    if (std::isnan(f)) continue;
    ASSERT_EQ(half::fp32_to_fp16_portable(f), half::fp32_to_fp16(f)) << std::hex << u;
  }
}

TEST(Half, Bf16) {
  EXPECT_EQ(bf16_to_fp32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_fp32(0xC040), -3.0f);
  EXPECT_EQ(bf16_to_fp32(0x4049), 3.140625f);
  EXPECT_EQ(fp32_to_bf16(3.14159265f), 0x4049);
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3F80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(fp32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(bf16_to_fp32(fp32_to_bf16(std::numeric_limits<float>::infinity()))));
}

}  // namespace
}  // namespace tangram
