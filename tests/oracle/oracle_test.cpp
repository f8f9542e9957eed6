// Cross-check against llama.cpp (tools/oracle/oracle.mjs, f32 KV cache): Tangram's logits at
// every prompt position and its greedy continuations must match llama.cpp's on the real
// stories260K model and on generated llama / qwen2 / qwen3 models in F32 and quantised types.
// A missing oracle is a failure (run scripts/oracle-setup.sh), never a skip.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "model/model.h"
#include "oracle/oracle_runner.h"
#include "support/test_support.h"
#include "synth/synth.h"

namespace tangram::testing {
namespace {

const std::vector<int32_t> kStoriesPrompt = {1, 403, 407, 261, 378};  // "<s>Once upon a time"

std::string stories_path() { return data_file("models/stories260K/stories260K.gguf").string(); }

std::vector<int32_t> random_prompt(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return t;
}

int32_t argmax(const float* x, int64_t n) {  // lowest id on ties, as llama.cpp's greedy sampler
  return static_cast<int32_t>(std::max_element(x, x + n) - x);
}

// Tangram's logits for every prompt position: [n][vocab].
std::vector<float> tangram_logits(Model& model, const std::vector<int32_t>& tokens) {
  ThreadPool pool(2);
  const auto n = static_cast<int64_t>(tokens.size());
  auto cache = model.new_cache(n);
  std::vector<float> logits(static_cast<size_t>(n * model.config().vocab));
  const Status st = model.forward(*cache, tokens.data(), n, 0, logits.data(), pool, true);
  EXPECT_TRUE(st.ok()) << st.message();
  return logits;
}

// Tangram's greedy continuation: prompt in one batch, then one token per forward().
std::vector<int32_t> tangram_greedy(Model& model, const std::vector<int32_t>& prompt, int n_gen) {
  ThreadPool pool(2);
  const int64_t vocab = model.config().vocab;
  auto cache = model.new_cache(static_cast<int64_t>(prompt.size()) + n_gen);
  std::vector<float> logits(static_cast<size_t>(vocab));  // [vocab] of the last token
  const auto np = static_cast<int64_t>(prompt.size());
  Status st = model.forward(*cache, prompt.data(), np, 0, logits.data(), pool);
  EXPECT_TRUE(st.ok()) << st.message();
  std::vector<int32_t> out;
  for (int i = 0; i < n_gen && st.ok(); ++i) {
    int32_t next = argmax(logits.data(), vocab);
    out.push_back(next);
    if (i + 1 < n_gen) st = model.forward(*cache, &next, 1, np + i, logits.data(), pool);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  return out;
}

struct Comparison {
  double max_abs = 0;       // over all positions and vocab entries
  double logit_std = 0;     // spread of llama.cpp's logits, for scale
  double argmax_agree = 0;  // fraction of positions whose argmax matches
};

// Compares Tangram with the oracle's all-position logits for `tokens`.
Comparison compare_logits(const std::string& path, const std::vector<int32_t>& tokens) {
  Comparison c;
  auto oracle = run_oracle("logits", path, tokens, "--all");
  EXPECT_TRUE(oracle.ok()) << oracle.message();
  auto model = Model::load(path);
  EXPECT_TRUE(model.ok()) << model.message();
  if (!oracle.ok() || !model.ok()) {
    c.max_abs = INFINITY;
    return c;
  }
  const int64_t vocab = (*model)->config().vocab;
  const auto ref = oracle->at("logits").get<std::vector<std::vector<float>>>();  // [n][vocab]
  EXPECT_EQ(oracle->at("n_vocab").get<int64_t>(), vocab);
  EXPECT_EQ(ref.size(), tokens.size());
  const std::vector<float> got = tangram_logits(**model, tokens);
  double sum = 0, sum2 = 0;
  int64_t count = 0, agree = 0;
  for (size_t p = 0; p < ref.size() && p < tokens.size(); ++p) {
    EXPECT_EQ(static_cast<int64_t>(ref[p].size()), vocab);
    if (static_cast<int64_t>(ref[p].size()) != vocab) continue;
    const float* row = got.data() + static_cast<int64_t>(p) * vocab;
    for (int64_t v = 0; v < vocab; ++v) {
      const double r = ref[p][static_cast<size_t>(v)];
      const double d = std::abs(static_cast<double>(row[v]) - r);
      if (!(d <= c.max_abs)) c.max_abs = d;  // NaN propagates as a failure
      sum += r;
      sum2 += r * r;
      ++count;
    }
    agree += argmax(row, vocab) == argmax(ref[p].data(), vocab) ? 1 : 0;
  }
  const double mean = sum / static_cast<double>(std::max<int64_t>(count, 1));
  c.logit_std = std::sqrt(
      std::max(0.0, sum2 / static_cast<double>(std::max<int64_t>(count, 1)) - mean * mean));
  c.argmax_agree =
      static_cast<double>(agree) / static_cast<double>(std::max<size_t>(ref.size(), 1));
  return c;
}

TEST(OracleSetup, OracleIsInstalled) {
  const Status st = oracle_ready();
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST(OracleStories260K, LogitsMatchAtEveryPosition) {
  const Comparison c = compare_logits(stories_path(), kStoriesPrompt);
  RecordProperty("max_abs_diff", fmt::format("{:.3g}", c.max_abs));
  EXPECT_LE(c.max_abs, 1e-4) << "logit std " << c.logit_std;
  EXPECT_EQ(c.argmax_agree, 1.0);
}

TEST(OracleStories260K, GreedyContinuationMatches) {
  constexpr int kGen = 16;
  const std::string path = stories_path();
  auto oracle =
      run_oracle("generate", path, kStoriesPrompt, fmt::format("--n {} --ignore-eog", kGen));
  ASSERT_TRUE(oracle.ok()) << oracle.message();
  auto model = Model::load(path);
  ASSERT_TRUE(model.ok()) << model.message();
  EXPECT_EQ(tangram_greedy(**model, kStoriesPrompt, kGen),
            oracle->at("tokens").get<std::vector<int32_t>>());
}

struct SynthCase {
  std::string name;
  std::string preset;
  GgmlType type = GgmlType::F32;
  SynthRopeScaling rope = SynthRopeScaling::None;
  bool tied = false;
  double max_abs;    // tolerance on |tangram - llama.cpp| over all logits
  double min_agree;  // least fraction of positions whose argmax must match
};

// Tolerances from measurement on logits of std ~2 (x86-64, AVX2 build of the oracle):
// F32 differs by float rounding of other summation orders (measured <= 1e-5). Q8_0, Q4_K
// and Q6_K came out within 3.4e-6 (both engines quantise activations the same way for
// them); Q4_0 differs by up to 0.083, so it gets 0.3 plus an argmax-agreement floor. Q4_K
// from 8 tokens runs tangram's interleaved-row kernel, which adds the same integer sums in
// another float order (each output within 2e-6 relative of the row-major kernels, checked
// call by call); on this prompt one such rounding difference moves an activation's Q8_K code
// by a step downstream and the logits by up to 0.049 (tangram's own 20-token batch against
// the same tokens one at a time differs by as much), so it gets 0.1. The other margins allow
// for llama.cpp picking other CPU kernels on other machines.
constexpr double kF32Tol = 1e-4;
constexpr double kQuantTol = 1e-3;
constexpr double kQ4_0Tol = 0.3;
constexpr double kQ4_KTol = 0.1;

// Llama 3 scaling is given as the rope_freqs tensor only: the synth's key variant
// (rope.scaling.type = "llama3") makes llama.cpp abort, since it knows no such scaling type.
std::vector<SynthCase> synth_cases() {
  using G = GgmlType;
  using R = SynthRopeScaling;
  return {
      {"llama_f32", "tiny-llama", G::F32, R::None, false, kF32Tol, 1.0},
      {"llama_f32_llama3_rope_tensor", "tiny-llama", G::F32, R::Llama3Tensor, false, kF32Tol, 1.0},
      {"llama_f32_tied", "tiny-llama", G::F32, R::None, true, kF32Tol, 1.0},
      {"qwen2_f32", "tiny-qwen2", G::F32, R::None, false, kF32Tol, 1.0},
      {"qwen3_f32", "tiny-qwen3", G::F32, R::None, false, kF32Tol, 1.0},
      {"llama_q8_0", "tiny-llama", G::Q8_0, R::None, false, kQuantTol, 0.9},
      {"qwen3_q8_0", "tiny-qwen3", G::Q8_0, R::None, false, kQuantTol, 0.9},
      {"llama_q4_k", "tiny-llama", G::Q4_K, R::None, false, kQ4_KTol, 0.9},
      {"qwen2_q6_k", "tiny-qwen2", G::Q6_K, R::None, false, kQuantTol, 0.9},
      {"qwen3_q4_0", "tiny-qwen3", G::Q4_0, R::None, false, kQ4_0Tol, 0.9},
      {"llama_q4_0", "tiny-llama", G::Q4_0, R::None, false, kQ4_0Tol, 0.9},
  };
}

SynthSpec make_spec(const SynthCase& sc) {
  auto preset = synth_preset(sc.preset);
  EXPECT_TRUE(preset.ok()) << preset.message();
  SynthSpec s = preset.ok() ? *preset : SynthSpec{};
  s.weight_type = sc.type;
  s.llama3_rope = sc.rope;
  s.tied_output = sc.tied;
  // llama3 scaling only changes frequencies below the original context's wavelengths; a
  // small original context makes it bite at head_dim 32.
  if (sc.rope != SynthRopeScaling::None) s.rope_original_context = 64;
  s.seed = 7;
  // With n_ctx equal to the trained context (256 in the presets), llama.cpp's row for the last
  // prompt token came back different from its own row for the same position in a longer
  // prompt (|diff| up to 9 on logits of std 2), while Tangram's stays the same; a trained
  // context above the oracle's n_ctx (256) avoids that, as for stories260K.
  s.ctx = 1024;
  return s;
}

std::string write_model(const SynthSpec& spec) {
  const std::string path = (temp_dir() / "model.gguf").string();
  const Status st = write_synth_model(spec, path, 2);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

class OracleSynth : public ::testing::TestWithParam<SynthCase> {};

TEST_P(OracleSynth, LogitsMatchAtEveryPosition) {
  const SynthCase& sc = GetParam();
  const SynthSpec spec = make_spec(sc);
  const std::string path = write_model(spec);
  const Comparison c = compare_logits(path, random_prompt(20, spec.vocab, 11));
  RecordProperty("max_abs_diff", fmt::format("{:.3g}", c.max_abs));
  std::printf("[oracle] %s: max|diff| %.3g (tol %.3g), logit std %.3g, argmax agree %.2f\n",
              sc.name.c_str(), c.max_abs, sc.max_abs, c.logit_std, c.argmax_agree);
  EXPECT_LE(c.max_abs, sc.max_abs) << "logit std " << c.logit_std;
  EXPECT_GE(c.argmax_agree, sc.min_agree);
}

INSTANTIATE_TEST_SUITE_P(Models, OracleSynth, ::testing::ValuesIn(synth_cases()),
                         [](const ::testing::TestParamInfo<SynthCase>& p) { return p.param.name; });

TEST(OracleSynthGreedy, F32LlamaContinuationMatches) {
  constexpr int kGen = 16;
  SynthCase sc{"llama_f32", "tiny-llama", GgmlType::F32, SynthRopeScaling::None, false, 0, 0};
  const SynthSpec spec = make_spec(sc);
  const std::string path = write_model(spec);
  const std::vector<int32_t> prompt = random_prompt(20, spec.vocab, 23);
  auto oracle = run_oracle("generate", path, prompt, fmt::format("--n {} --ignore-eog", kGen));
  ASSERT_TRUE(oracle.ok()) << oracle.message();
  auto model = Model::load(path);
  ASSERT_TRUE(model.ok()) << model.message();
  EXPECT_EQ(tangram_greedy(**model, prompt, kGen),
            oracle->at("tokens").get<std::vector<int32_t>>());
}

}  // namespace
}  // namespace tangram::testing
