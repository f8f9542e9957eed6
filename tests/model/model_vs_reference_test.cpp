// The optimised forward pass against the plain reference (reference_model.cpp) on generated
// models of every architecture variant and weight type: prefill of prompts of several lengths,
// token-by-token decode, thread counts 1 and 2.
//
// Tolerances (max |logit difference|; logits have a standard deviation near 2):
//  * The reference dequantises weights exactly as the engine reads them, so weight rounding
//    itself never differs; what differs is the engine's float32 arithmetic (and, for the
//    quantised weight types, its activation quantisation).
//  * F32 / F16 / BF16 weights: float accumulation in a different order (BLAS, SIMD, blocked
//    softmax) against double: errors of a few 1e-6 relative per operation, a few 1e-5 on the
//    logits after two layers. Tolerance 1e-3.
//  * Q8_0, Q4_0, Q4_K, Q6_K and the Q4_K_M mix: for batches of up to 8 tokens (decode, short
//    prompts) the kernels quantise the activations to 8 bits (Q8_0 / Q8_K blocks, rounding
//    error up to 1/254 of a block's largest value) before the integer dot products. That
//    perturbs every matrix input by ~0.2-0.4% and, through two layers, the logits by up to a
//    few hundredths. Longer batches use float activations and land near the float error.
//    Tolerance 0.1.
// A sensitivity check shows the comparison can fail: dropping each architecture's feature from
// the reference (rope layout, bias, QK norm, rope scaling) moves logits by far more than these
// tolerances.
#include <gtest/gtest.h>

#include <functional>

#include "model_test_util.h"

namespace tangram::testing {
namespace {

struct Variant {
  const char* name;
  std::function<SynthSpec()> make;
};

SynthSpec preset(const char* name) {
  auto s = synth_preset(name);
  EXPECT_TRUE(s.ok()) << s.message();
  return s.ok() ? *s : SynthSpec{};
}

// Each variant covers one architecture feature; GQA ratios 4 (n_kv_head 2) and 1 (8), tied
// and untied outputs are spread across them.
const Variant kVariants[] = {
    {"llama_gqa4", [] { return preset("tiny-llama"); }},
    {"llama_gqa1_tied",
     [] {
       SynthSpec s = preset("tiny-llama");
       s.n_kv_head = 8;
       s.tied_output = true;
       return s;
     }},
    {"llama3rope_keys_gqa4",
     [] {
       SynthSpec s = preset("tiny-llama");
       s.llama3_rope = SynthRopeScaling::Llama3Keys;
       s.rope_original_context = 32;  // scaling bites within the tested positions
       return s;
     }},
    {"llama3rope_tensor_gqa1_tied",
     [] {
       SynthSpec s = preset("tiny-llama");
       s.n_kv_head = 8;
       s.tied_output = true;
       s.llama3_rope = SynthRopeScaling::Llama3Tensor;
       s.rope_original_context = 32;
       return s;
     }},
    {"qwen2_gqa4_tied",
     [] {
       SynthSpec s = preset("tiny-qwen2");
       s.tied_output = true;
       return s;
     }},
    {"qwen2_gqa1",
     [] {
       SynthSpec s = preset("tiny-qwen2");
       s.n_kv_head = 8;
       return s;
     }},
    {"qwen3_gqa4", [] { return preset("tiny-qwen3"); }},
    {"qwen3_gqa1_tied",
     [] {
       SynthSpec s = preset("tiny-qwen3");
       s.n_kv_head = 8;
       s.tied_output = true;
       return s;
     }},
};

struct WeightType {
  const char* name;  // as synth_set_weight_type reads it
  double max_tolerance;
  double rms_tolerance;
};
// Measured on these models (max / rms): float types 1.3e-5 / 2.5e-6; Q8_0 and Q4_0 (Q8_0
// activations) 0.20 / 0.040; Q4_K, Q6_K, Q4_K_M (Q8_K activations: 256-wide blocks, so the
// heavy-tailed SwiGLU outputs get coarser steps) 0.32 / 0.058. Tolerances leave ~1.5-8x room.
const WeightType kTypes[] = {
    {"f32", 1e-4, 1e-5}, {"f16", 1e-4, 1e-5}, {"bf16", 1e-4, 1e-5}, {"q8_0", 0.5, 0.06},
    {"q4_0", 0.5, 0.06}, {"q4_k", 0.5, 0.09}, {"q6_k", 0.5, 0.09},  {"q4_k_m", 0.5, 0.09},
};
// An f16 KV cache rounds every key and value to 11 significant bits (relative 2^-12), which
// moves attention outputs by ~1e-4 relative; with float weights the logits then differ by
// up to a few 1e-3.
constexpr double kF16KvMaxTolerance = 1e-2;
constexpr double kF16KvRmsTolerance = 2e-3;

constexpr int64_t kPromptLengths[] = {1, 7, 33, 100};
constexpr int64_t kMaxLen = 100;

// Largest and root-mean-square |engine - reference| over the compared logits.
struct ErrorStats {
  double max = 0, sum_sq = 0;
  int64_t count = 0;
  void add(const float* got, const double* want, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const double d = std::abs(static_cast<double>(got[i]) - want[i]);
      if (!(d <= max)) max = d;  // NaN sticks
      sum_sq += d * d;
    }
    count += n;
  }
  double rms() const { return count ? std::sqrt(sum_sq / static_cast<double>(count)) : 0.0; }
};

struct Case {
  size_t variant;
  size_t type;
  int threads;
  KvType kv = KvType::F32;
};

// Runs prompts of every length (all logits and last-only) and a token-by-token decode of
// `decode_len` positions, comparing with the reference and decode with prefill.
void check_against_reference(const Case& c, int64_t decode_len) {
  const Variant& variant = kVariants[c.variant];
  const WeightType& wt = kTypes[c.type];
  SCOPED_TRACE(::testing::Message() << variant.name << " " << wt.name << " threads " << c.threads
                                    << " kv " << kv_type_name(c.kv));
  const double max_tol = c.kv == KvType::F16 ? kF16KvMaxTolerance : wt.max_tolerance;
  const double rms_tol = c.kv == KvType::F16 ? kF16KvRmsTolerance : wt.rms_tolerance;
  SynthSpec spec = variant.make();
  ASSERT_TRUE(synth_set_weight_type(spec, wt.name).ok());
  spec.seed = 7 + c.variant * 31 + c.type;
  auto model = load_model(write_synth(spec));
  ASSERT_NE(model, nullptr);
  const int64_t V = model->config().vocab;

  const ReferenceModel ref(model->gguf(), ref_params_for(spec, model->gguf()));
  const auto tokens = random_tokens(kMaxLen, V, static_cast<uint32_t>(spec.seed));
  const std::vector<double> expect = ref.forward(tokens);  // [kMaxLen][V]
  ASSERT_GT(rms(expect), 1.0) << "degenerate logits";

  ThreadPool pool(c.threads);
  ErrorStats prefill_err, last_err, decode_err, decode_vs_prefill;
  std::vector<float> prefill_all;  // [kMaxLen][V] from the longest prompt
  for (int64_t len : kPromptLengths) {
    auto cache = model->new_cache(kMaxLen, c.kv);
    std::vector<float> logits(static_cast<size_t>(len * V));
    ASSERT_TRUE(model->forward(*cache, tokens.data(), len, 0, logits.data(), pool, true).ok());
    prefill_err.add(logits.data(), expect.data(), len * V);
    if (len == kMaxLen) prefill_all = logits;
    // Last-token-only logits.
    auto cache2 = model->new_cache(kMaxLen, c.kv);
    std::vector<float> last(static_cast<size_t>(V));
    ASSERT_TRUE(model->forward(*cache2, tokens.data(), len, 0, last.data(), pool).ok());
    last_err.add(last.data(), expect.data() + (len - 1) * V, V);
  }
  auto cache = model->new_cache(kMaxLen, c.kv);
  std::vector<float> logits(static_cast<size_t>(V));
  std::vector<double> prefill_row(static_cast<size_t>(V));
  for (int64_t p = 0; p < decode_len; ++p) {
    ASSERT_TRUE(
        model->forward(*cache, &tokens[static_cast<size_t>(p)], 1, p, logits.data(), pool).ok());
    decode_err.add(logits.data(), expect.data() + p * V, V);
    std::copy_n(prefill_all.data() + p * V, V, prefill_row.data());
    decode_vs_prefill.add(logits.data(), prefill_row.data(), V);
  }
  const auto check = [&](const char* what, const ErrorStats& e) {
    EXPECT_LE(e.max, max_tol) << what << " (max |diff|)";
    EXPECT_LE(e.rms(), rms_tol) << what << " (rms diff)";
    ::testing::Test::RecordProperty(fmt::format("{}_t{}", what, c.threads),
                                    fmt::format("max {:.3g} rms {:.3g}", e.max, e.rms()));
  };
  check("prefill", prefill_err);
  check("last", last_err);
  check("decode", decode_err);
  check("decode_vs_prefill", decode_vs_prefill);
}

class ModelVsReference : public ::testing::TestWithParam<Case> {};

TEST_P(ModelVsReference, PrefillAndDecodeMatchReference) {
  // Two threads on a shared test machine pay for every barrier; fewer decode steps suffice to
  // show the split changes nothing.
  check_against_reference(GetParam(), GetParam().threads == 1 ? kMaxLen : 20);
}

// Every weight type on the four architecture features, the GQA-1 / tied variants on a float
// and a quantised type, all single-threaded; then every variant with two threads.
std::vector<Case> cases() {
  std::vector<Case> out;
  for (size_t v = 0; v < std::size(kVariants); ++v) {
    const bool feature_variant = v % 2 == 0;
    for (size_t t = 0; t < std::size(kTypes); ++t)
      if (feature_variant || t == 0 || t == 4) out.push_back({v, t, 1});
  }
  for (size_t v = 0; v < std::size(kVariants); ++v)
    out.push_back({v, (v * 3) % std::size(kTypes), 2});
  for (size_t v = 0; v < std::size(kVariants); v += 2) out.push_back({v, 0, 1, KvType::F16});
  return out;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return fmt::format("{}_{}_t{}_kv{}", kVariants[info.param.variant].name,
                     kTypes[info.param.type].name, info.param.threads, kv_type_name(info.param.kv));
}

INSTANTIATE_TEST_SUITE_P(All, ModelVsReference, ::testing::ValuesIn(cases()), case_name);

// The comparison can fail: taking one architecture feature out of the reference moves its
// logits far beyond the float tolerance, so the engine must implement each feature.
struct Sensitivity {
  size_t variant;
  const char* what;
  std::function<void(RefParams&)> break_it;
};

TEST(ModelVsReferenceSensitivity, EachFeatureChangesTheLogits) {
  const Sensitivity checks[] = {
      {0, "neox rope on llama", [](RefParams& p) { p.neox = true; }},
      {2, "no llama3 rope scaling", [](RefParams& p) { p.rope_divisors.clear(); }},
      {4, "no qkv bias", [](RefParams& p) { p.qkv_bias = false; }},
      {4, "interleaved rope on qwen2", [](RefParams& p) { p.neox = false; }},
      {6, "no qk norm", [](RefParams& p) { p.qk_norm = false; }},
  };
  constexpr int64_t kLen = 33;
  for (const Sensitivity& s : checks) {
    SCOPED_TRACE(s.what);
    SynthSpec spec = kVariants[s.variant].make();
    auto model = load_model(write_synth(spec));
    ASSERT_NE(model, nullptr);
    const int64_t V = model->config().vocab;
    RefParams params = ref_params_for(spec, model->gguf());
    s.break_it(params);
    const ReferenceModel broken(model->gguf(), params);
    const auto tokens = random_tokens(kLen, V, 3);
    const std::vector<double> expect = broken.forward(tokens);
    ThreadPool pool(1);
    auto cache = model->new_cache(kLen);
    std::vector<float> logits(static_cast<size_t>(kLen * V));
    ASSERT_TRUE(model->forward(*cache, tokens.data(), kLen, 0, logits.data(), pool, true).ok());
    EXPECT_GT(max_abs_diff(logits.data(), expect.data(), kLen * V), 100 * kTypes[0].max_tolerance);
  }
}

}  // namespace
}  // namespace tangram::testing
