// The kernel level choice: what the CPU supports, the names TANGRAM_CPU takes, and that the
// level in use is one this CPU can run; the family decoding and the tuning chosen from it.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/cpu_features.h"

namespace tangram {
namespace {

TEST(CpuFeatures, LevelsAreSupportedAndLowestFirst) {
  const auto levels = cpu::supported_levels();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.front(), cpu::KernelLevel::Avx2);  // the build baseline
  for (size_t i = 0; i < levels.size(); ++i) {
    EXPECT_TRUE(cpu::supports(levels[i])) << cpu::level_name(levels[i]);
    if (i > 0) {
      EXPECT_LT(static_cast<int>(levels[i - 1]), static_cast<int>(levels[i]));
    }
  }
  // AVX-512 needs the OS to save zmm state as well as the instructions.
  const cpu::CpuFeatures& f = cpu::features();
  EXPECT_EQ(cpu::supports(cpu::KernelLevel::Avx512Vnni),
            f.avx2 && f.fma && f.f16c && f.os_ymm && f.avx512f && f.avx512bw && f.avx512vl &&
                f.avx512_vnni && f.os_zmm);
}

TEST(CpuFeatures, NamesRoundTripAndUnknownNamesAreRefused) {
  for (const cpu::KernelLevel l : {cpu::KernelLevel::Avx2, cpu::KernelLevel::Avx512Vnni})
    EXPECT_EQ(cpu::parse_level(cpu::level_name(l)), l);
  EXPECT_FALSE(cpu::parse_level("sse2").has_value());
  EXPECT_FALSE(cpu::parse_level("").has_value());
}

// The process's level: supported, the best one unless TANGRAM_CPU names a supported lower one
// (ctest runs this suite once more with TANGRAM_CPU=avx2).
TEST(CpuFeatures, ActiveLevelFollowsTheOverride) {
  const cpu::LevelChoice& choice = cpu::active();
  EXPECT_TRUE(cpu::supports(choice.level));
  EXPECT_FALSE(choice.reason.empty());
  const char* env = std::getenv("TANGRAM_CPU");
  const auto wanted = env != nullptr ? cpu::parse_level(env) : std::nullopt;
  if (wanted && cpu::supports(*wanted)) {
    EXPECT_EQ(choice.level, *wanted);
  } else {
    EXPECT_EQ(choice.level, cpu::supported_levels().back());
  }
}

// CPUID leaf 1's family field: the extended family counts only where the base is 0xF.
TEST(CpuFeatures, DisplayFamilyAddsTheExtendedFamilyOnlyAboveBaseF) {
  EXPECT_EQ(cpu::display_family(0x00A10F11u), 0x19);  // Zen 4 (Genoa)
  EXPECT_EQ(cpu::display_family(0x00B00F21u), 0x1A);  // Zen 5 (Turin)
  EXPECT_EQ(cpu::display_family(0x000806F8u), 6);     // Intel Sapphire Rapids: base 6, no extended
  EXPECT_EQ(cpu::display_family(0x0FF00600u), 6);     // extended bits ignored below base 0xF
}

// CPUID leaf 1's model field: the extended model counts only for base families 6 and 0xF.
TEST(CpuFeatures, DisplayModelAddsTheExtendedModelForFamilies6AndF) {
  EXPECT_EQ(cpu::display_model(0x000606A6u), 0x6A);  // Intel Ice Lake-SP
  EXPECT_EQ(cpu::display_model(0x000806F8u), 0x8F);  // Intel Sapphire Rapids
  EXPECT_EQ(cpu::display_model(0x00A10F11u), 0x11);  // Zen 4 (Genoa): family 19h model 11h
  EXPECT_EQ(cpu::display_model(0x00B00F21u), 0x02);  // Zen 5 (Turin): family 1Ah model 02h
  EXPECT_EQ(cpu::display_model(0x00010530u), 0x3);   // base family 5: the extended model ignored
}

// The line reports name the CPU by: brand first where there is one, then vendor, family and
// model in hexadecimal.
TEST(CpuFeatures, DescribeNamesBrandVendorFamilyAndModel) {
  cpu::CpuFeatures f;
  f.vendor = "GenuineIntel";
  f.brand = "Intel(R) Xeon(R) Processor @ 2.80GHz";
  f.family = 6;
  f.model = 0x6A;
  EXPECT_EQ(cpu::describe(f),
            "Intel(R) Xeon(R) Processor @ 2.80GHz (GenuineIntel family 6h model 6Ah)");
  f.brand.clear();
  EXPECT_EQ(cpu::describe(f), "GenuineIntel family 6h model 6Ah");
  const cpu::CpuFeatures& here = cpu::features();
  EXPECT_FALSE(here.vendor.empty());  // every x86-64 CPU answers leaf 0
  EXPECT_NE(cpu::describe(here).find(here.vendor), std::string::npos);
}

// Zen 5 and later AMD cores and Intel's Ice Lake-SP prefetch weights from fewer tokens
// (AVX-512 Q4_K from one, Q8_0 from two; AVX2 Q8_0 from one); every other CPU keeps the
// thresholds measured on Zen 4. Ice Lake-SP alone loads the Q8_0 value rows' scales rather than
// gathering them. The choice says which it is.
TEST(CpuFeatures, TuningFollowsTheFamily) {
  cpu::CpuFeatures zen4, zen5, intel, ice_lake;
  zen4.vendor = zen5.vendor = "AuthenticAMD";
  zen4.family = 0x19;
  zen5.family = 0x1A;
  intel.vendor = ice_lake.vendor = "GenuineIntel";
  intel.family = ice_lake.family = 6;
  intel.model = 0x8F;  // Sapphire Rapids: not measured, so the default
  ice_lake.model = 0x6A;
  const cpu::KernelTuning t4 = cpu::tuning_for(zen4), t5 = cpu::tuning_for(zen5),
                          ti = cpu::tuning_for(intel);
  const cpu::KernelTuning til = cpu::tuning_for(ice_lake);
  EXPECT_EQ(til.q8_0_avx512_prefetch_min_tokens, t5.q8_0_avx512_prefetch_min_tokens);
  EXPECT_EQ(til.q4_k_avx512_prefetch_min_tokens, t5.q4_k_avx512_prefetch_min_tokens);
  EXPECT_EQ(til.q8_0_avx2_prefetch_min_tokens, t5.q8_0_avx2_prefetch_min_tokens);
  EXPECT_NE(til.reason.find("Ice Lake"), std::string_view::npos);
  EXPECT_FALSE(til.q8_0_value_scales_gathered);  // its gathers cost more than scalar loads
  EXPECT_TRUE(t4.q8_0_value_scales_gathered);
  EXPECT_TRUE(t5.q8_0_value_scales_gathered);
  EXPECT_TRUE(ti.q8_0_value_scales_gathered);
  EXPECT_NE(cpu::describe(til).find("attention loads"), std::string::npos);
  EXPECT_NE(cpu::describe(t4).find("attention gathers"), std::string::npos);
  cpu::CpuFeatures other_vendor = ice_lake;  // family 6 model 6Ah of another vendor is not Ice Lake
  other_vendor.vendor = "CentaurHauls";
  EXPECT_EQ(cpu::tuning_for(other_vendor).q8_0_avx512_prefetch_min_tokens,
            t4.q8_0_avx512_prefetch_min_tokens);
  cpu::CpuFeatures not_amd = zen5;  // family 1Ah of another vendor is not Zen 5
  not_amd.vendor = "HygonGenuine";
  EXPECT_EQ(cpu::tuning_for(not_amd).q8_0_avx512_prefetch_min_tokens,
            t4.q8_0_avx512_prefetch_min_tokens);
  EXPECT_EQ(t4.q8_0_avx512_prefetch_min_tokens, 4);
  EXPECT_EQ(t4.q4_k_avx512_prefetch_min_tokens, 2);
  EXPECT_EQ(t4.q8_0_avx2_prefetch_min_tokens, 3);
  EXPECT_EQ(t5.q8_0_avx512_prefetch_min_tokens, 2);
  EXPECT_EQ(t5.q4_k_avx512_prefetch_min_tokens, 1);
  EXPECT_EQ(t5.q8_0_avx2_prefetch_min_tokens, 1);
  EXPECT_EQ(ti.q8_0_avx512_prefetch_min_tokens, t4.q8_0_avx512_prefetch_min_tokens);
  EXPECT_EQ(ti.q4_k_avx512_prefetch_min_tokens, t4.q4_k_avx512_prefetch_min_tokens);
  EXPECT_EQ(ti.q8_0_avx2_prefetch_min_tokens, t4.q8_0_avx2_prefetch_min_tokens);
  EXPECT_NE(t5.reason.find("Zen 5"), std::string_view::npos);
  EXPECT_NE(t4.reason.find("default"), std::string_view::npos);
  EXPECT_EQ(cpu::tuning().q8_0_avx512_prefetch_min_tokens,
            cpu::tuning_for(cpu::features()).q8_0_avx512_prefetch_min_tokens);
}

}  // namespace
}  // namespace tangram
