// Helpers shared by the model tests: synthetic models on disk, reference parameters from a
// SynthSpec, prompts and logit comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/model.h"
#include "reference_model.h"
#include "support/test_support.h"
#include "synth/synth.h"

namespace tangram::testing {

// Reference parameters derived from the spec itself (not from the engine's config reader).
inline RefParams ref_params_for(const SynthSpec& s, const GgufFile& g) {
  RefParams p;
  p.n_layers = s.n_layers;
  p.n_embd = s.n_embd;
  p.n_ff = s.n_ff;
  p.n_head = s.n_head;
  p.n_kv_head = s.n_kv_head;
  p.head_dim = s.head_dim;
  p.vocab = s.vocab;
  p.rope_base = s.rope_base;
  const std::string a(arch_name(s.arch));
  // The file's epsilon is stored as f32; the reference uses that exact value.
  p.rms_eps = g.get_float(a + ".attention.layer_norm_rms_epsilon").value_or(-1.0);
  p.neox = s.arch != Arch::Llama;
  p.qkv_bias = s.arch == Arch::Qwen2;
  p.qk_norm = s.arch == Arch::Qwen3;
  p.tied = s.tied_output;
  if (s.llama3_rope != SynthRopeScaling::None)
    p.rope_divisors = reference_llama3_divisors(s.head_dim, s.rope_base, s.rope_scale_factor,
                                                s.rope_low_freq_factor, s.rope_high_freq_factor,
                                                static_cast<double>(s.rope_original_context));
  return p;
}

inline std::string write_synth(const SynthSpec& spec, const std::string& file = "model.gguf") {
  const std::string path = (temp_dir() / file).string();
  const Status st = write_synth_model(spec, path, 2);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

inline std::unique_ptr<Model> load_model(const std::string& path) {
  auto m = Model::load(path);
  EXPECT_TRUE(m.ok()) << m.message();
  return m.ok() ? std::move(m).value() : nullptr;
}

inline std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return t;
}

// max |a[i] - b[i]| over rows [0, rows) of two [rows][width] arrays.
template <typename A, typename B>
double max_abs_diff(const A* a, const B* b, int64_t count) {
  double m = 0;
  for (int64_t i = 0; i < count; ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (!(d <= m)) m = d;  // NaN propagates as a failure
  }
  return m;
}

inline double rms(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s / static_cast<double>(v.size()));
}

}  // namespace tangram::testing
