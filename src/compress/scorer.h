// KV compression scorers: how much each cached entry of one KV head is worth keeping.
//
// A scorer sees one (layer, KV head) of one sequence at a time, after a turn's prefill: the
// head's stored entries (keys after RoPE and any k-norm, values, and the token position of
// each entry) and, for query-aware methods, a set of queries of the head's GQA group (the
// observation window: the last prompt tokens' queries; or, for the KVzip-style scorer, the
// queries of a context-reconstruction pass). It writes one score per entry; higher = keep.
// Which entries are kept (budgets, sink and recent window) is decided elsewhere; scorers only
// rank. Scoring each head separately keeps the interface valid after earlier compressions,
// when every head holds a different set of positions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace tangram {

class Rope;

// Where a scorer's queries come from.
enum class QuerySource {
  None,            // query-free (KeyDiff, StreamingLLM)
  Observation,     // the last prompt tokens' queries (SnapKV, TOVA, ExpectedAttention)
  Reconstruction,  // a "repeat the context" pass over the cache (KVzip-style)
};

struct HeadScoreInput {
  int layer = 0;
  int kv_head = 0;
  int head_dim = 0;                    // key / query row length
  int head_dim_v = 0;                  // value row length
  int64_t n = 0;                       // entries to score
  const float* keys = nullptr;         // [n][head_dim]    as stored: after RoPE (and k-norm)
  const float* values = nullptr;       // [n][head_dim_v]
  const int32_t* positions = nullptr;  // [n] token position of each entry, ascending
  int q_per_kv = 1;                    // query heads that read this KV head (GQA group)
  int64_t n_queries = 0;               // query rows given (0 for query-free scorers)
  const float* queries = nullptr;      // [n_queries][q_per_kv][head_dim] after RoPE (and q-norm)
  const int32_t* query_positions = nullptr;  // [n_queries] ascending
  const Rope* rope = nullptr;                // the model's rotary embedding (ExpectedAttention)
  int64_t next_position = 0;                 // first position after the scored context
};

// Every scorer's parameters, with the published defaults.
struct ScorerOptions {
  std::string name =
      "keydiff";  // snapkv | tova | keydiff | streamingllm | expected_attention | kvzip
  // SnapKV: observation window (queries) and max-pool kernel (odd).
  int snap_window = 32;
  int snap_kernel = 7;
  // ExpectedAttention: queries whose statistics are used (the last ones of the prompt, the
  // first `ea_skip` of them dropped), future positions averaged, epsilon, and switches.
  int ea_queries = 256;
  int ea_skip = 4;
  int ea_future = 512;
  float ea_epsilon = 1e-2f;
  bool ea_covariance = true;
  bool ea_value_norm = true;
};

class Scorer {
 public:
  virtual ~Scorer() = default;
  virtual std::string_view name() const = 0;
  virtual QuerySource query_source() const = 0;
  // Query rows wanted for a prompt of n_prompt tokens (Observation: the last ones).
  virtual int64_t queries_wanted(int64_t n_prompt) const = 0;
  // Writes scores[0 .. in.n). Errors: inconsistent input (null buffers, sizes), never aborts.
  virtual Status score(const HeadScoreInput& in, float* scores) const = 0;
};

// The scorer named options.name. Error for an unknown name or an invalid parameter
// (e.g. an even SnapKV kernel), naming the valid choices.
Result<std::unique_ptr<Scorer>> make_scorer(const ScorerOptions& options);
// Names make_scorer accepts, for --help and errors.
std::vector<std::string> scorer_names();

}  // namespace tangram
