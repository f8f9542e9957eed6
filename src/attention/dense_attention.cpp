#include "attention/dense_attention.h"

#include <limits>
#include <new>

#include "kv/kv_row.h"

namespace tangram {

Status dense_attention(const KvShape& shape, const DenseKv& kv, const float* q, int64_t n,
                       int64_t pos0, float* out, ThreadPool& pool, AttentionWorkspace& ws) {
  if (shape.n_head < 1 || shape.n_kv_head < 1 || shape.head_dim < 1 || shape.head_dim_v < 1 ||
      shape.n_head % shape.n_kv_head != 0)
    return make_error("dense attention: bad shape ({} heads, {} KV heads, head sizes {} and {})",
                      shape.n_head, shape.n_kv_head, shape.head_dim, shape.head_dim_v);
  if (n < 0 || n > std::numeric_limits<int32_t>::max() || pos0 < 0 || kv.length < 0)
    return make_error("dense attention: {} queries at {} over {} entries", n, pos0, kv.length);
  if ((n > 0 && (q == nullptr || out == nullptr)) ||
      (kv.length > 0 && (kv.k == nullptr || kv.v == nullptr)))
    return make_error("dense attention: missing buffer");
  AttentionBatch& b = ws.batch;
  b.n_head = shape.n_head;
  b.n_kv_head = shape.n_kv_head;
  b.head_dim = shape.head_dim;
  b.head_dim_v = shape.head_dim_v;
  b.type = kv.type;
  TG_TRY(check_kv_row_dims(kv.type, shape.head_dim, shape.head_dim_v));
  const size_t k_row = kv_row_bytes(kv.type, shape.head_dim);
  const size_t v_row = kv_row_bytes(kv.type, shape.head_dim_v);
  const auto len = static_cast<size_t>(kv.length);
  try {
    b.seqs.assign(1, AttentionSequence{q, out, n, pos0});
    b.heads.clear();
    b.head_order.clear();
    b.group_start.clear();
    for (int h = 0; h < shape.n_kv_head; ++h) {
      b.head_order.push_back(h);  // dense heads share nothing: each is its own group
      b.group_start.push_back(1);
      KvHeadView view;
      view.k_base = static_cast<const uint8_t*>(kv.k) + static_cast<size_t>(h) * len * k_row;
      view.v_base = static_cast<const uint8_t*>(kv.v) + static_cast<size_t>(h) * len * v_row;
      view.k_row_bytes = k_row;
      view.v_row_bytes = v_row;
      view.length = kv.length;
      b.heads.push_back(view);
    }
    plan_attention(b, pool.size(), ws.plan);
  } catch (const std::bad_alloc&) {
    return make_error("dense attention: out of host memory");
  }
  return run_attention(b, ws.plan, pool, ws);
}

}  // namespace tangram
