// Attention over dense per-head arrays, through the same planner and kernel as the paged
// cache: the contiguous baseline the paged layout is measured against, and a second user of
// the kernel for the tests.
#pragma once

#include <cstdint>

#include "attention/paged_attention.h"
#include "common/result.h"
#include "common/thread_pool.h"
#include "kv/kv_cache.h"

namespace tangram {

// Keys and values of every KV head of one layer, each head holding `length` entries at
// positions 0 .. length-1, as rows of `type` (kv_row.h):
//   k: [n_kv_head][length][key row]   v: [n_kv_head][length][value row]
struct DenseKv {
  const void* k = nullptr;
  const void* v = nullptr;
  int64_t length = 0;
  KvType type = KvType::F32;
};

// Causal attention of n queries at positions pos0 .. pos0+n-1 (same contract as
// attend_sequence): q: [n][n_head][head_dim], out: [n][n_head][head_dim_v].
// Errors: a shape that is not positive or not GQA-divisible, head sizes the type cannot store,
// null buffers, negative sizes.
Status dense_attention(const KvShape& shape, const DenseKv& kv, const float* q, int64_t n,
                       int64_t pos0, float* out, ThreadPool& pool, AttentionWorkspace& ws);

}  // namespace tangram
