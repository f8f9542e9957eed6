// The kernel level choice: what the CPU supports, the names TANGRAM_CPU takes, and that the
// level in use is one this CPU can run.
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
            f.avx2 && f.fma && f.f16c && f.os_ymm && f.avx512f && f.avx512bw && f.avx512vl && f.avx512_vnni &&
                f.os_zmm);
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

}  // namespace
}  // namespace tangram
