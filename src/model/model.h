// A loaded decoder-only transformer (llama / qwen2 / qwen3) and its forward pass.
//
// forward() runs a batch of consecutive tokens of one sequence through every layer: a prompt
// goes through in one batched pass (matrix-matrix products), decode passes one token. Keys
// and values go to a KvCache, which also computes the attention. forward_step() runs one
// scheduler step of many sequences at once: their tokens (decode tokens and prefill chunks
// alike) are stacked into one batch for the matrix products, each sequence's keys and values
// go to its own cache, and the attention of all sequences is one BatchedAttention call per
// layer (attention/batched_attention.h: a single planned paged call when every cache is paged, so
// threads split the work across sequences too; its planner is attention_planner()). Buffers
// belong to the Model, grow to the largest batch seen (at most ModelOptions::max_batch tokens)
// and are reused, so decode allocates nothing. A Model runs one forward at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "attention/attention_planner.h"
#include "attention/batched_attention.h"
#include "common/result.h"
#include "common/thread_pool.h"
#include "gguf/gguf_file.h"
#include "kv/kv_cache.h"
#include "model/config.h"
#include "model/rope.h"
#include "model/weights.h"

namespace tangram {

// One sequence's share of a batched step.
struct SequenceStep {
  KvCache* cache = nullptr;
  const int32_t* tokens = nullptr;  // [n]
  int64_t n = 0;                    // tokens at positions pos0 .. pos0 + n - 1
  int64_t pos0 = 0;                 // must equal cache->n_positions()
  float* logits = nullptr;          // [vocab] for the last token, [n][vocab] with all_logits;
                                    // null: no logits (e.g. a prompt chunk that is not the last)
  bool all_logits = false;
  // Optional query capture (for KV compression scorers): the queries, after RoPE and q-norm,
  // of the rows at positions capture_from .. capture_from + capture_rows - 1 that this step
  // runs are copied to capture_q: [n_layers][capture_rows][n_head][head_dim], row index =
  // position - capture_from. Rows outside the range are ignored, so a range may span steps.
  float* capture_q = nullptr;
  int64_t capture_from = 0;
  int64_t capture_rows = 0;
  // Optional hidden states (embeddings): [n][n_embd], every row of this step after the final
  // norm, i.e. what the output projection would read.
  float* hidden = nullptr;
};

struct ModelOptions {
  // Longest batch of tokens one pass processes; longer prompts go through in chunks of this
  // size. Bounds the working memory.
  int64_t max_batch = 512;
  // Where the weights live: copied into transparent huge pages (faster decode, see FileMemory)
  // or read through the file's memory map (no copy, no extra memory).
  FileMemory weights = FileMemory::kHugePages;
  // Called as the copy proceeds (kHugePages only).
  LoadProgress load_progress;
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
  const Rope& rope() const { return rope_; }
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

  // One step of several sequences (each cache at most once), sum of n <= max_batch(). Each
  // sequence is checked as forward() checks it and its cache reserved before anything runs;
  // on an error nothing is computed (a reservation already made may stay).
  Status forward_step(std::span<const SequenceStep> seqs, ThreadPool& pool);
  int64_t max_batch() const { return max_batch_; }
  // How the attention of a step is split across threads, and the statistics of its plans.
  AttentionPlanner& attention_planner() { return attention_.planner(); }
  const AttentionPlanner& attention_planner() const { return attention_.planner(); }
  // Times attention (all layers) from now on, for benchmarks; off by default (it costs system
  // calls every layer).
  void time_attention(bool on) { attention_.set_timing(on); }
  // Wall time the forward passes have spent in attention while timed.
  double attention_seconds() const { return attention_.attend_seconds(); }
  // The pool's CPU time over the same calls (all its threads; ThreadPool::cpu_seconds).
  double attention_cpu_seconds() const { return attention_.attend_cpu_seconds(); }

 private:
  Model() = default;
  // Checks one sequence's step against the model and its cache.
  Status check_step(const SequenceStep& s) const;
  // Copies the captured query rows of one layer (q: [m][n_head][head_dim]).
  void capture_queries(std::span<const SequenceStep> seqs, int layer, const float* q) const;
  // Runs checked, reserved steps whose tokens total m <= max_batch.
  Status run_step(std::span<const SequenceStep> seqs, int64_t m, ThreadPool& pool);
  // The parts of run_step, in order. Rows are the step's tokens, sequence after sequence.
  // Token embeddings into x_ and RoPE tables for every row; returns the rows wanting logits.
  int64_t embed_tokens(std::span<const SequenceStep> seqs);
  // x_ += attention(rmsnorm(x_)) for one layer; keys and values go to the caches.
  Status attention_block(int layer, std::span<const SequenceStep> seqs, int64_t m,
                         ThreadPool& pool);
  // x_ += ffn(rmsnorm(x_)) for one layer (SwiGLU).
  void feed_forward_block(int layer, int64_t m, ThreadPool& pool);
  // Final norm of every row of the steps that want hidden states, into their buffers.
  void output_hidden(std::span<const SequenceStep> seqs) const;
  // Final norm and output projection of the rows that want logits, into the steps' buffers.
  Status output_logits(std::span<const SequenceStep> seqs, int64_t logit_rows, ThreadPool& pool);
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
  std::vector<float> logits_;    // [rows][vocab]  logits of a multi-sequence step, then copied out
  std::vector<AttentionQuery> attn_queries_;  // [sequences] of the step
  BatchedAttention attention_;
};

}  // namespace tangram
