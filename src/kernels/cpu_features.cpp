// CPUID / XGETBV probing and the one-time choice of kernel level.
#include "kernels/cpu_features.h"

#include <cpuid.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace tangram::cpu {
namespace {

bool bit(unsigned reg, int n) { return ((reg >> n) & 1u) != 0; }

// XCR0, the register state the OS saves on context switches. Only valid when CPUID says the OS
// enabled XSAVE (OSXSAVE); the caller checks that first.
uint64_t read_xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

// The brand string, 48 bytes in three leaves (NUL-padded, often with leading or trailing spaces),
// or "" where the CPU lacks the leaves.
std::string brand_string() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0x80000000u, &a, &b, &c, &d) == 0 || a < 0x80000004u) return "";
  char text[49] = {};
  for (unsigned leaf = 0; leaf < 3; ++leaf) {
    __get_cpuid(0x80000002u + leaf, &a, &b, &c, &d);
    const unsigned regs[4] = {a, b, c, d};
    std::memcpy(text + 16 * leaf, regs, sizeof(regs));
  }
  std::string s(text);
  const size_t first = s.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(' ') - first + 1);
}

CpuFeatures probe() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d) != 0) {  // vendor string in ebx, edx, ecx
    char vendor[13] = {};
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
    f.vendor = vendor;
  }
  f.brand = brand_string();
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return f;
  f.family = display_family(a);
  f.model = display_model(a);
  f.fma = bit(c, 12);
  f.f16c = bit(c, 29);
  const bool osxsave = bit(c, 27);
  if (osxsave) {
    const uint64_t xcr0 = read_xcr0();
    f.os_ymm = (xcr0 & 0x6) == 0x6;    // SSE and AVX state
    f.os_zmm = (xcr0 & 0xE6) == 0xE6;  // plus opmask, upper halves of zmm0-15, zmm16-31
  }
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) != 0) {
    f.avx2 = bit(b, 5);
    f.avx512f = bit(b, 16);
    f.avx512bw = bit(b, 30);
    f.avx512vl = bit(b, 31);
    f.avx512_vnni = bit(c, 11);
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d) != 0) f.avx512_bf16 = bit(a, 5);
  return f;
}

LevelChoice choose() {
  KernelLevel best = KernelLevel::Avx2;
  for (const KernelLevel l : supported_levels()) best = l;
  const char* env = std::getenv("TANGRAM_CPU");
  if (env == nullptr || *env == '\0') return {best, "best the CPU supports"};
  const auto wanted = parse_level(env);
  if (!wanted)
    return {best, fmt::format("TANGRAM_CPU={} is not a level (avx2, avx512); ignored", env)};
  if (!supports(*wanted))
    return {best, fmt::format("TANGRAM_CPU={}: this CPU cannot run it; ignored", env)};
  return {*wanted, fmt::format("TANGRAM_CPU={}", env)};
}

}  // namespace

const CpuFeatures& features() {
  static const CpuFeatures f = probe();
  return f;
}

bool supports(KernelLevel level) {
  const CpuFeatures& f = features();
  const bool avx2 = f.avx2 && f.fma && f.f16c && f.os_ymm;
  switch (level) {
    case KernelLevel::Avx2:
      return avx2;
    case KernelLevel::Avx512Vnni:
      return avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512_vnni && f.os_zmm;
  }
  return false;
}

std::vector<KernelLevel> supported_levels() {
  std::vector<KernelLevel> levels;
  for (const KernelLevel l : {KernelLevel::Avx2, KernelLevel::Avx512Vnni})
    if (supports(l)) levels.push_back(l);
  // The binary itself needs AVX2: report it even on a CPU that lacks it, where nothing runs.
  if (levels.empty()) levels.push_back(KernelLevel::Avx2);
  return levels;
}

std::string_view level_name(KernelLevel level) {
  switch (level) {
    case KernelLevel::Avx2:
      return "avx2";
    case KernelLevel::Avx512Vnni:
      return "avx512";
  }
  return "?";
}

std::optional<KernelLevel> parse_level(std::string_view name) {
  if (name == "avx2") return KernelLevel::Avx2;
  if (name == "avx512") return KernelLevel::Avx512Vnni;
  return std::nullopt;
}

const LevelChoice& active() {
  static const LevelChoice choice = choose();
  return choice;
}

int display_family(unsigned leaf1_eax) {
  const int base = static_cast<int>((leaf1_eax >> 8) & 0xF);
  return base == 0xF ? base + static_cast<int>((leaf1_eax >> 20) & 0xFF) : base;
}

int display_model(unsigned leaf1_eax) {
  const unsigned base_family = (leaf1_eax >> 8) & 0xF;
  const int base = static_cast<int>((leaf1_eax >> 4) & 0xF);
  return base_family == 6 || base_family == 0xF
             ? base + (static_cast<int>((leaf1_eax >> 16) & 0xF) << 4)
             : base;
}

std::string describe(const CpuFeatures& f) {
  const std::string id =
      fmt::format("{} family {:X}h model {:X}h", f.vendor.empty() ? "unknown vendor" : f.vendor,
                  f.family, f.model);
  return f.brand.empty() ? id : fmt::format("{} ({})", f.brand, id);
}

KernelTuning tuning_for(const CpuFeatures& f) {
  // Cores where prefetching from fewer tokens (and, on Ice Lake-SP, loading the Q8_0 value
  // scales) measured faster: each named for what was measured.
  const bool zen5_or_later = f.vendor == "AuthenticAMD" && f.family >= 0x1A;
  const bool ice_lake_sp = f.vendor == "GenuineIntel" && f.family == 6 && f.model == 0x6A;
  if (zen5_or_later || ice_lake_sp)
    return KernelTuning{.q8_0_avx512_prefetch_min_tokens = 2,
                        .q4_k_avx512_prefetch_min_tokens = 1,
                        .q8_0_avx2_prefetch_min_tokens = 1,
                        .q8_0_value_scales_gathered = !ice_lake_sp,
                        .reason = zen5_or_later ? "AMD family 1Ah or later (Zen 5)"
                                                : "Intel family 6 model 6Ah (Ice Lake-SP)"};
  return KernelTuning{.q8_0_avx512_prefetch_min_tokens = 4,
                      .q4_k_avx512_prefetch_min_tokens = 2,
                      .q8_0_avx2_prefetch_min_tokens = 3,
                      .q8_0_value_scales_gathered = true,
                      .reason = "default (measured on Zen 4)"};
}

std::string describe(const KernelTuning& t) {
  return fmt::format(
      "{}: matmul prefetches weights from {} tokens (AVX-512 Q8_0), {} (AVX-512 Q4_K), {} (AVX2 "
      "Q8_0), "
      "1 (AVX2 Q4_K); Q8_0 attention {} its value rows' scales (AVX-512)",
      t.reason, t.q8_0_avx512_prefetch_min_tokens, t.q4_k_avx512_prefetch_min_tokens,
      t.q8_0_avx2_prefetch_min_tokens, t.q8_0_value_scales_gathered ? "gathers" : "loads");
}

const KernelTuning& tuning() {
  static const KernelTuning t = tuning_for(features());
  return t;
}

std::string feature_list() {
  const CpuFeatures& f = features();
  std::string out;
  auto add = [&](bool has, std::string_view name) {
    if (!has) return;
    if (!out.empty()) out += ' ';
    out += name;
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512vl, "avx512vl");
  add(f.avx512_vnni, "avx512_vnni");
  add(f.avx512_bf16, "avx512_bf16");
  add(f.os_ymm, "os:ymm");
  add(f.os_zmm, "os:zmm");
  return out.empty() ? "none of the SIMD features Tangram uses" : out;
}

}  // namespace tangram::cpu
