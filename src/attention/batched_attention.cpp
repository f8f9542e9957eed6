#include "attention/batched_attention.h"

#include <algorithm>
#include <chrono>
#include <new>

namespace tangram {

BatchedAttention::BatchedAttention() = default;
BatchedAttention::~BatchedAttention() = default;

Status BatchedAttention::begin_step(std::span<const AttentionQuery> seqs, int n_layers) {
  if (seqs.empty()) return make_error("attention: no sequences given");
  if (std::any_of(seqs.begin(), seqs.end(),
                  [](const AttentionQuery& s) { return s.cache == nullptr; }))
    return make_error("attention: a sequence without a KV cache");
  try {
    seqs_.assign(seqs.begin(), seqs.end());
    if (!ws_) ws_ = std::make_unique<AttentionWorkspace>();
    items_.resize(seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i)  // q and out are set per layer by attend()
      items_[i] = AttentionItem{seqs[i].cache, nullptr, nullptr, seqs[i].n, seqs[i].pos0};
  } catch (const std::bad_alloc&) {
    return make_error("attention: out of host memory for the step's workspace");
  }
  return planner_.begin_step(items_, n_layers);
}

Status BatchedAttention::attend(int layer, const float* q, float* out, ThreadPool& pool) {
  if (!timing_) return attend_layer(layer, q, out, pool);
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = pool.cpu_seconds();  // exact per thread (the process clock lags by ticks)
  const Status st = attend_layer(layer, q, out, pool);
  attend_cpu_seconds_ += pool.cpu_seconds() - cpu0;
  attend_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

Status BatchedAttention::attend_layer(int layer, const float* q, float* out, ThreadPool& pool) {
  if (seqs_.empty()) return make_error("attention: attend() before begin_step()");
  const KvShape& shape = seqs_.front().cache->shape();
  const int64_t q_row = int64_t{shape.n_head} * shape.head_dim;
  const int64_t out_row = int64_t{shape.n_head} * shape.head_dim_v;
  int64_t r = 0;  // first stacked row of the sequence at hand
  for (AttentionItem& item : items_) {
    item.q = q + r * q_row;
    item.out = out + r * out_row;
    r += item.n;
  }
  AttentionWorkspace& ws = *ws_;
  TG_TRY(build_attention_batch(layer, items_, ws.batch));
  return run_attention(ws.batch, planner_.plan(layer, ws.batch, pool.size()), pool, ws);
}

}  // namespace tangram
