// A loaded decoder-only transformer (llama / qwen2 / qwen3) and its forward pass.
//
// forward() runs a batch of consecutive tokens of one sequence through every layer: a prompt
// goes through in one batched pass (matrix-matrix products), decode passes one token. Keys
// and values go to a KvCache, which also computes the attention. Working buffers belong to
// the Model, grow to the largest batch seen (at most ModelOptions::max_batch tokens) and are
// reused, so decode allocates nothing. A Model runs one forward() at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/thread_pool.h"
#include "kv/kv_cache.h"
#include "model/config.h"
#include "model/rope.h"
#include "model/weights.h"

namespace tangram {

class GgufFile;

struct ModelOptions {
  // Longest batch of tokens one pass processes; longer prompts go through in chunks of this
  // size. Bounds the working memory.
  int64_t max_batch = 512;
};

class Model {
 public:
  static Result<std::unique_ptr<Model>> load(const std::string& path,
                                             const ModelOptions& options = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return config_; }
  const GgufFile& gguf() const { return *gguf_; }
  const ModelWeights& weights() const { return weights_; }
  KvShape kv_shape() const;

  // A cache for one sequence of up to max_tokens positions (<= 0 or more than the model's
  // context length: the context length). Memory is taken as positions are used.
  std::unique_ptr<KvCache> new_cache(int64_t max_tokens, KvType type = KvType::F32) const;

  // Runs tokens[n] at positions pos0 .. pos0+n-1; pos0 must equal cache.n_positions().
  // logits: [n][vocab] when all_logits, else [vocab] for the last token only; may be null when
  // no logits are wanted (e.g. an intermediate prompt chunk).
  // Errors (nothing computed, cache unchanged): n < 1, a token id outside [0, vocab), a cache
  // of another shape, pos0 != cache.n_positions(), or positions past the cache capacity or
  // the model's context length.
  Status forward(KvCache& cache, const int32_t* tokens, int64_t n, int64_t pos0, float* logits,
                 ThreadPool& pool, bool all_logits = false);

 private:
  Model() = default;
  // One batch of m <= max_batch tokens. logits: [m][vocab] (all rows), [vocab] (last row
  // only) or null.
  Status forward_batch(KvCache& cache, const int32_t* tokens, int64_t m, int64_t pos0,
                       float* logits, bool all_rows, ThreadPool& pool);
  Status ensure_buffers(int64_t m);
  void grow_buffers(int64_t m);  // may throw std::bad_alloc

  std::unique_ptr<GgufFile> gguf_;
  ModelConfig config_;
  ModelWeights weights_;
  Rope rope_;
  int64_t max_batch_ = 512;

  // Working buffers, sized for buf_tokens_ tokens.
  int64_t buf_tokens_ = 0;
  std::vector<float> x_;         // [m][n_embd]  residual stream
  std::vector<float> xn_;        // [m][n_embd]  normalised input of a sub-block
  std::vector<float> q_;         // [m][n_head][head_dim]
  std::vector<float> k_;         // [m][n_kv_head][head_dim]
  std::vector<float> v_;         // [m][n_kv_head][head_dim_v]
  std::vector<float> attn_;      // [m][n_head][head_dim_v]
  std::vector<float> proj_;      // [m][n_embd]  output of attn_output / ffn_down
  std::vector<float> gate_;      // [m][n_ff]
  std::vector<float> up_;        // [m][n_ff]
  std::vector<float> rope_cos_;  // [m][rope_dim / 2]
  std::vector<float> rope_sin_;  // [m][rope_dim / 2]
};

}  // namespace tangram
