// The attention of one forward step over all of its sequences, each with its own KvCache.
//
// The caller stacks the sequences' query rows into one buffer (sequence after sequence) and
// names, at the start of the step, each sequence's cache, rows and first position. Each layer's
// attention of all sequences is one planned call over the caches' head views
// (paged_attention.h), so threads split the work across sequences as well as heads, and the
// AttentionPlanner decides how. The caller never sees a cache's layout.
// Buffers are kept and reused across steps. One step at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "attention/attention_planner.h"
#include "attention/paged_attention.h"
#include "common/result.h"
#include "common/thread_pool.h"
#include "kv/kv_cache.h"

namespace tangram {

// One sequence of a step: n query rows at positions pos0 .. pos0 + n - 1, whose keys and
// values are in `cache` (written before attend() is called for a layer).
struct AttentionQuery {
  const KvCache* cache = nullptr;
  int64_t n = 0;
  int64_t pos0 = 0;
};

class BatchedAttention {
 public:
  BatchedAttention();
  ~BatchedAttention();
  BatchedAttention(const BatchedAttention&) = delete;
  BatchedAttention& operator=(const BatchedAttention&) = delete;

  AttentionPlanner& planner() { return planner_; }
  const AttentionPlanner& planner() const { return planner_; }

  // Starts a step of n_layers layers over `seqs`, in the order their rows are stacked. All
  // caches must share one shape. Errors: no sequences, a null cache, out of memory.
  Status begin_step(std::span<const AttentionQuery> seqs, int n_layers);
  // Causal attention of every sequence of the step on one layer (see attend_sequence).
  //   q: [rows][n_head][head_dim]   out: [rows][n_head][head_dim_v], rows = sum of n
  Status attend(int layer, const float* q, float* out, ThreadPool& pool);

  // Wall time spent in attend() while timing is on (for the share of a step attention takes),
  // and the pool's CPU time over the same calls (every pool thread, waits included;
  // ThreadPool::cpu_seconds). Off by default: reading every thread's CPU clock is a system
  // call per thread, twice per layer, which a serving step should not pay for a figure only
  // benchmarks read.
  void set_timing(bool on) { timing_ = on; }
  double attend_seconds() const { return attend_seconds_; }
  double attend_cpu_seconds() const { return attend_cpu_seconds_; }

 private:
  Status attend_layer(int layer, const float* q, float* out, ThreadPool& pool);

  AttentionPlanner planner_;
  std::vector<AttentionQuery> seqs_;
  std::vector<AttentionItem> items_;  // [sequences]
  std::unique_ptr<AttentionWorkspace> ws_;
  bool timing_ = false;
  double attend_seconds_ = 0;
  double attend_cpu_seconds_ = 0;
};

}  // namespace tangram
