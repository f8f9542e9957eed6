// Shared set-up of the scheduler tests: small models, their tokenizers, and the plain
// reference every batched result is checked against (one sequence, contiguous F32 KV cache,
// Model::forward).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "scheduler/scheduler.h"
#include "support/test_support.h"
#include "synth/synth.h"
#include "tokenizer/tokenizer.h"

namespace tangram::testing {

struct TestModel {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

inline TestModel load_test_model(const std::string& path) {
  TestModel t;
  auto m = Model::load(path);
  EXPECT_TRUE(m.ok()) << m.message();
  if (!m.ok()) return t;
  t.model = std::move(m).value();
  auto tok = Tokenizer::from_gguf(t.model->gguf());
  EXPECT_TRUE(tok.ok()) << tok.message();
  if (tok.ok()) t.tokenizer = std::move(tok).value();
  return t;
}

// A synthetic model written once per process (name = preset).
inline TestModel synth_model(const std::string& preset, GgmlType type = GgmlType::F32) {
  auto spec = synth_preset(preset);
  EXPECT_TRUE(spec.ok()) << spec.message();
  spec->weight_type = type;
  spec->ctx = 512;
  const std::string path = (temp_dir() / (preset + ".gguf")).string();
  const Status st = write_synth_model(*spec, path, 2);
  EXPECT_TRUE(st.ok()) << st.message();
  return load_test_model(path);
}

inline std::vector<int32_t> prompt_of(int64_t n, uint32_t seed, int64_t vocab) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(
      3, static_cast<int32_t>(vocab - 1));  // past <unk>, <s>, </s>
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = d(rng);
  return t;
}

// Greedy continuation by the plain path, with the margin (top-1 minus top-2 logit) of each
// choice; end-of-generation tokens are banned, as SamplingParams::ignore_eos does.
struct Reference {
  std::vector<int32_t> tokens;
  std::vector<float> margins;
  std::vector<float> first_logits;  // [vocab] logits of the prompt's last token
};

// Greedy continuation of `cache` whose last forward gave `logits` ([vocab]), n_gen tokens, each
// with its margin; end-of-generation tokens banned.
inline Reference greedy_from(Model& model, const Tokenizer& tok, KvCache& cache,
                             std::vector<float> logits, int n_gen, ThreadPool& pool) {
  Reference ref;
  ref.first_logits = logits;
  const auto vocab = static_cast<int>(model.config().vocab);
  Status st = Status::Ok();
  for (int i = 0; i < n_gen && st.ok(); ++i) {
    int32_t best = -1, second = -1;
    for (int32_t id = 0; id < std::min(vocab, tok.n_vocab()); ++id) {
      if (tok.is_eog(id)) continue;
      const float l = logits[static_cast<size_t>(id)];
      if (best < 0 || l > logits[static_cast<size_t>(best)]) {
        second = best;
        best = id;
      } else if (second < 0 || l > logits[static_cast<size_t>(second)]) {
        second = id;
      }
    }
    ref.tokens.push_back(best);
    ref.margins.push_back(logits[static_cast<size_t>(best)] - logits[static_cast<size_t>(second)]);
    if (i + 1 < n_gen)
      st = model.forward(cache, &best, 1, cache.n_positions(), logits.data(), pool);
  }
  EXPECT_TRUE(st.ok()) << st.message();
  return ref;
}

inline Reference reference_greedy(Model& model, const Tokenizer& tok,
                                  const std::vector<int32_t>& prompt, int n_gen, ThreadPool& pool) {
  auto cache = model.new_cache(0, KvType::F32);
  std::vector<float> logits(static_cast<size_t>(model.config().vocab));
  const Status st = model.forward(*cache, prompt.data(), static_cast<int64_t>(prompt.size()), 0,
                                  logits.data(), pool);
  EXPECT_TRUE(st.ok()) << st.message();
  if (!st.ok()) return Reference{};
  return greedy_from(model, tok, *cache, std::move(logits), n_gen, pool);
}

// Checks generated tokens against the reference: equal up to the end, or up to a step where the
// reference's choice was a near tie (margin < tie), where different rounding may legitimately
// pick the other token and the sequences part.
inline void expect_same_greedy(const std::vector<int32_t>& got, const Reference& ref,
                               const std::string& what, float tie = 1e-3f) {
  ASSERT_EQ(got.size(), ref.tokens.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == ref.tokens[i]) continue;
    EXPECT_LT(ref.margins[i], tie)
        << what << ": token " << i << " is " << got[i] << ", the reference chose " << ref.tokens[i]
        << " by a margin of " << ref.margins[i];
    return;
  }
}

inline Request greedy_request(std::vector<int32_t> prompt, int n_gen) {
  Request r;
  r.prompt = std::move(prompt);
  r.params.temperature = 0.0f;
  r.params.max_tokens = n_gen;
  r.params.ignore_eos = true;
  return r;
}

inline float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<float>::infinity();
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

}  // namespace tangram::testing
