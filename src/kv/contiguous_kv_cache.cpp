#include "kv/contiguous_kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <type_traits>

#include "kernels/ops.h"
#include "kv/kv_row.h"

namespace tangram {

namespace {

// The one place that decides how attention work is spread over threads. A task is one token,
// one KV head and a slice of the query heads that read it; the heads of a slice share every K
// and V row they load. When tokens x KV heads are fewer than threads (decode with few KV
// heads), groups are cut into slices so every thread has work. Tasks go round-robin, which
// also balances causal prefill, where later tokens see more keys.
template <typename Fn>  // fn(token, kv_head, h_begin, h_end, thread)
void for_each_attention_task(ThreadPool& pool, int64_t n_tokens, int n_kv_head, int group,
                             const Fn& fn) {
  struct Plan {
    int64_t n_tasks;
    int n_kv_head, group, slices, per_slice;
    const Fn* fn;
  };
  const int64_t base_tasks = n_tokens * n_kv_head;
  const int64_t want = (pool.size() + base_tasks - 1) / base_tasks;
  const int slices = static_cast<int>(std::clamp<int64_t>(want, 1, group));
  const Plan plan{base_tasks * slices, n_kv_head, group, slices, (group + slices - 1) / slices, &fn};
  // Captures one pointer, so handing it to the pool as a std::function does not allocate.
  const auto body = [p = &plan](int thread, int n_threads) {
    for (int64_t task = thread; task < p->n_tasks; task += n_threads) {
      const int slice = static_cast<int>(task % p->slices);
      const int64_t tk = task / p->slices;
      const int kv_head = static_cast<int>(tk % p->n_kv_head);
      const int64_t token = tk / p->n_kv_head;
      const int h_begin = kv_head * p->group + slice * p->per_slice;
      const int h_end = std::min(kv_head * p->group + p->group, h_begin + p->per_slice);
      if (h_begin < h_end) (*p->fn)(token, kv_head, h_begin, h_end, thread);
    }
  };
  if (plan.n_tasks == 1 || pool.size() == 1) {
    body(0, 1);
  } else {
    pool.run(body);
  }
}

}  // namespace

ContiguousKvCache::ContiguousKvCache(const KvShape& shape, int64_t capacity, KvType type)
    : shape_(shape),
      capacity_(std::max<int64_t>(capacity, 0)),
      type_(type),
      k_row_bytes_(kv_row_bytes(type, shape.head_dim)),
      v_row_bytes_(kv_row_bytes(type, shape.head_dim_v)) {
  layers_.resize(static_cast<size_t>(std::max(shape_.n_layers, 0)));
}

int64_t ContiguousKvCache::n_positions() const {
  return layers_.empty() ? 0 : layers_.back().length;
}

int64_t ContiguousKvCache::length(int layer, int kv_head) const {
  if (layer < 0 || layer >= shape_.n_layers || kv_head < 0 || kv_head >= shape_.n_kv_head) return 0;
  return layers_[static_cast<size_t>(layer)].length;
}

Status ContiguousKvCache::reserve(int64_t n_total) {
  if (n_total > capacity_)
    return make_error("KV cache overflow: {} positions needed, capacity is {}", n_total,
                      capacity_);
  if (n_total <= allocated_) return Status::Ok();
  // Double to keep re-layouts rare, never past capacity.
  const int64_t new_alloc = std::min(capacity_, std::max({n_total, 2 * allocated_, int64_t{16}}));
  const auto kv = static_cast<size_t>(shape_.n_kv_head);
  const auto hd = static_cast<size_t>(shape_.head_dim);
  const auto hdv = static_cast<size_t>(shape_.head_dim_v);
  const auto old_n = static_cast<size_t>(allocated_);
  const auto new_n = static_cast<size_t>(new_alloc);
  // Copies [kv][old_n][d] into a new [kv][new_n][d], keeping the first `len` rows per head.
  auto grown = [&](const auto& vec, size_t d, int64_t len) {
    std::remove_cvref_t<decltype(vec)> next(kv * new_n * d);
    const auto rows = static_cast<size_t>(len);
    for (size_t h = 0; h < kv && rows > 0; ++h)
      std::copy_n(vec.data() + h * old_n * d, rows * d, next.data() + h * new_n * d);
    return next;
  };
  try {
    // Build every layer's new buffers first so a failed allocation leaves the cache unchanged.
    std::vector<Layer> next(layers_.size());
    for (size_t l = 0; l < layers_.size(); ++l) {
      const Layer& src = layers_[l];
      Layer& dst = next[l];
      dst.length = src.length;
      if (type_ == KvType::F32) {
        dst.k32 = grown(src.k32, hd, src.length);
        dst.v32 = grown(src.v32, hdv, src.length);
      } else {
        dst.kb = grown(src.kb, k_row_bytes_, src.length);
        dst.vb = grown(src.vb, v_row_bytes_, src.length);
      }
    }
    layers_.swap(next);
  } catch (const std::bad_alloc&) {
    return make_error("KV cache: out of memory growing to {} positions", new_alloc);
  }
  allocated_ = new_alloc;
  return Status::Ok();
}

Status ContiguousKvCache::write(int layer, int64_t pos0, const float* k, const float* v,
                                int64_t n) {
  if (layer < 0 || layer >= shape_.n_layers)
    return make_error("KV cache: layer {} out of range", layer);
  Layer& L = layers_[static_cast<size_t>(layer)];
  if (n < 0 || pos0 != L.length || pos0 + n > allocated_)
    return make_error("KV cache: write of {} positions at {} (layer length {}, reserved {})", n,
                      pos0, L.length, allocated_);
  const int64_t hd = shape_.head_dim;
  const int64_t hdv = shape_.head_dim_v;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < shape_.n_kv_head; ++h) {
      const float* ks = k + (t * shape_.n_kv_head + h) * hd;
      const float* vs = v + (t * shape_.n_kv_head + h) * hdv;
      const int64_t slot = h * allocated_ + pos0 + t;
      if (type_ == KvType::F32) {
        std::memcpy(L.k32.data() + slot * hd, ks, static_cast<size_t>(hd) * sizeof(float));
        std::memcpy(L.v32.data() + slot * hdv, vs, static_cast<size_t>(hdv) * sizeof(float));
      } else {
        store_kv_row(type_, ks, L.kb.data() + static_cast<size_t>(slot) * k_row_bytes_, hd);
        store_kv_row(type_, vs, L.vb.data() + static_cast<size_t>(slot) * v_row_bytes_, hdv);
      }
    }
  }
  L.length = pos0 + n;
  return Status::Ok();
}

void ContiguousKvCache::ensure_scratch(int n_threads) const {
  const int group = shape_.n_head / shape_.n_kv_head;
  if (static_cast<int>(scratch_.size()) >= n_threads && scratch_allocated_ == allocated_) return;
  scratch_.resize(static_cast<size_t>(std::max<int>(n_threads, static_cast<int>(scratch_.size()))));
  for (Scratch& s : scratch_) {
    s.scores.resize(static_cast<size_t>(group * allocated_));
    s.k_row.resize(static_cast<size_t>(shape_.head_dim));
    s.v_row.resize(static_cast<size_t>(shape_.head_dim_v));
  }
  scratch_allocated_ = allocated_;
}

void ContiguousKvCache::attend(int layer, const float* q, int64_t n, int64_t pos0, float* out,
                               ThreadPool& pool) const {
  if (layer < 0 || layer >= shape_.n_layers || n <= 0) return;
  const Layer& L = layers_[static_cast<size_t>(layer)];
  const int group = shape_.n_head / shape_.n_kv_head;
  ensure_scratch(pool.size());
  const int64_t q_stride = int64_t{shape_.n_head} * shape_.head_dim;     // per token
  const int64_t o_stride = int64_t{shape_.n_head} * shape_.head_dim_v;  // per token
  std::vector<Scratch>& scratch = scratch_;  // one per thread index
  for_each_attention_task(
      pool, n, shape_.n_kv_head, group,
      [&](int64_t token, int kv_head, int h_begin, int h_end, int thread) {
        // Causal: position pos0+token sees keys 0..pos0+token.
        const int64_t n_keys = std::min(L.length, pos0 + token + 1);
        attend_slice(L, kv_head, h_begin, h_end, q + token * q_stride, n_keys,
                     out + token * o_stride, scratch[static_cast<size_t>(thread)]);
      });
}

void ContiguousKvCache::attend_slice(const Layer& L, int kv_head, int h_begin, int h_end,
                                     const float* q_tok, int64_t n_keys, float* out_tok,
                                     Scratch& s) const {
  const int64_t hd = shape_.head_dim;
  const int64_t hdv = shape_.head_dim_v;
  const int n_rows = h_end - h_begin;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  const int64_t base = int64_t{kv_head} * allocated_;  // first slot of this head
  float* scores = s.scores.data();                       // [n_rows][n_keys]
  for (int r = 0; r < n_rows; ++r)
    std::fill_n(out_tok + (h_begin + r) * hdv, hdv, 0.0f);
  if (n_keys <= 0) return;

  for (int64_t j = 0; j < n_keys; ++j) {
    const float* k_row;
    if (type_ == KvType::F32) {
      k_row = L.k32.data() + (base + j) * hd;
    } else {
      load_kv_row(type_, L.kb.data() + static_cast<size_t>(base + j) * k_row_bytes_, s.k_row.data(), hd);
      k_row = s.k_row.data();
    }
    for (int r = 0; r < n_rows; ++r)
      scores[r * n_keys + j] = dot_f32(q_tok + (h_begin + r) * hd, k_row, hd) * scale;
  }
  for (int r = 0; r < n_rows; ++r) softmax(scores + r * n_keys, n_keys);
  for (int64_t j = 0; j < n_keys; ++j) {
    const float* v_row;
    if (type_ == KvType::F32) {
      v_row = L.v32.data() + (base + j) * hdv;
    } else {
      load_kv_row(type_, L.vb.data() + static_cast<size_t>(base + j) * v_row_bytes_, s.v_row.data(),
                  hdv);
      v_row = s.v_row.data();
    }
    for (int r = 0; r < n_rows; ++r)
      axpy(out_tok + (h_begin + r) * hdv, scores[r * n_keys + j], v_row, hdv);
  }
}

void ContiguousKvCache::truncate(int64_t n_tokens) {
  n_tokens = std::max<int64_t>(n_tokens, 0);
  for (Layer& L : layers_) L.length = std::min(L.length, n_tokens);
}

}  // namespace tangram
