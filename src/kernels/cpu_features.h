// Which SIMD kernels this process runs. The binary is built for x86-64-v3 (AVX2, FMA, F16C);
// the hot kernels also have AVX-512 variants (compiled with per-function target options),
// chosen once at start from CPUID and the OS's saved register state, so one binary runs on
// every x86-64-v3 CPU and uses AVX-512 where the CPU and OS have it.
// TANGRAM_CPU=avx2 forces the lower path (testing, comparisons); a level the CPU cannot run
// is never chosen.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tangram::cpu {

// Kernel levels, lowest first.
enum class KernelLevel {
  Avx2,        // AVX2 + FMA + F16C: the build baseline
  Avx512Vnni,  // AVX-512 F/BW/VL + VNNI (int8 dot products), with the OS saving zmm state
};

struct CpuFeatures {
  std::string vendor;  // CPUID leaf 0's vendor string: "AuthenticAMD", "GenuineIntel", ...
  std::string
      brand;  // the processor brand string (leaves 8000_0002h-8000_0004h), trimmed; may be empty
  int family = 0;  // display family: base family, plus the extended family where base is 0xF
  int model =
      0;  // display model: base model, plus the extended model where the family is 6 or 0xF+
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512_vnni = false,
       avx512_bf16 = false;
  bool os_ymm = false;  // XCR0: the OS saves ymm state
  bool os_zmm = false;  // XCR0: the OS saves opmask and zmm state
};

// Read once from CPUID / XGETBV.
const CpuFeatures& features();
bool supports(KernelLevel level);
// Every level this machine can run, lowest first (tests run each one).
std::vector<KernelLevel> supported_levels();

std::string_view level_name(KernelLevel level);
std::optional<KernelLevel> parse_level(std::string_view name);

struct LevelChoice {
  KernelLevel level;
  std::string
      reason;  // "best the CPU supports", "TANGRAM_CPU=avx2", or why the override was ignored
};
// The level the kernels run, chosen on first use: the best supported one, lowered by
// TANGRAM_CPU when that names a supported level.
const LevelChoice& active();
inline KernelLevel active_level() { return active().level; }

// Choices inside the matmul and attention kernels that measured differently on different cores,
// made once from the CPU's family and model. Software prefetch of interleaved weight blocks ahead
// of the matmul (prefetch_ahead): on Zen 4 it only competed with the hardware's own stream below a
// few tokens (AVX-512 Q4_K one token 17.2 -> 22.1 ms a step, Q8_0 1.06-1.28x slower at 1-2 tokens);
// on a Zen 5 core (AMD family 1Ah) it was what the short streams lacked: Q4_K at one token
// (1.35-2.1x less CPU a step), Q8_0 at 2-3 tokens (AVX-512) and at 1-2 (AVX2), while AVX-512 Q8_0
// at one token ran faster without it; an Intel Ice Lake-SP (family 6 model 6Ah) measured the same
// way round (AVX2 Q8_0 at 1-2 tokens 12-20% less CPU a step, AVX-512 Q4_K at one 4%, AVX-512 Q8_0
// at 3 tokens 7%, the rest unchanged). The AVX-512 Q8_0 attention value loop reads its rows' block
// scales by gathers, except on Ice Lake-SP, where scalar loads made it 15-19% faster
// (docs/benchmarks.md, "Kernel tuning by CPU family").
struct KernelTuning {
  int q8_0_avx512_prefetch_min_tokens =
      4;  // the AVX-512 interleaved Q8_0 kernels prefetch from this many tokens
  int q4_k_avx512_prefetch_min_tokens =
      2;  // ... and the AVX-512 Q4_K ones (AVX2's Q4_K kernels always do)
  int q8_0_avx2_prefetch_min_tokens =
      3;  // ... and the AVX2 Q8_0 ones (its two-pass kernel, 3+ tokens, always does)
  // The AVX-512 Q8_0 attention value loop gathers its rows' block scales (else loads them).
  bool q8_0_value_scales_gathered = true;
  std::string_view reason;  // which CPU it was chosen for
};
const KernelTuning& tuning();  // tuning_for(features()), once
KernelTuning tuning_for(const CpuFeatures& f);
// The choice and its thresholds as one line, for `tangram info --cpu`.
std::string describe(const KernelTuning& t);
// The display family of CPUID leaf 1's eax (base family, plus the extended family where the
// base is 0xF: 0x19 is Zen 3/4, 0x1A Zen 5).
int display_family(unsigned leaf1_eax);

// The display model of CPUID leaf 1's eax (base model, plus the extended model shifted left by
// 4 where the base family is 6 or 0xF: 6Ah is Ice Lake-SP, 8Fh Sapphire Rapids).
int display_model(unsigned leaf1_eax);

// Which CPU this is, as one line for reports and `tangram info --cpu`: the brand string, then
// vendor, family and model in CPUID's hexadecimal ("Intel(R) Xeon(R) ... (GenuineIntel family
// 6h model 6Ah)"). Benchmark figures differ by core, so bench-model's report names the one it
// ran on.
std::string describe(const CpuFeatures& f);

// The CPU's features as one line ("avx2 fma f16c avx512f ..."), for `tangram info --cpu`.
std::string feature_list();

}  // namespace tangram::cpu
