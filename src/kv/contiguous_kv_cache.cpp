#include "kv/contiguous_kv_cache.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <type_traits>

#include "kv/kv_head_view.h"
#include "kv/kv_row.h"

namespace tangram {

ContiguousKvCache::ContiguousKvCache(const KvShape& shape, int64_t capacity, KvType type)
    : shape_(shape),
      capacity_(std::max<int64_t>(capacity, 0)),
      type_(type),
      k_row_bytes_(kv_row_bytes(type, shape.head_dim)),
      v_row_bytes_(kv_row_bytes(type, shape.head_dim_v)) {
  layers_.resize(static_cast<size_t>(std::max(shape_.n_layers, 0)));
  // A model's shape always gives a map (its config is checked at load); a shape with no heads
  // gets the smallest map, which attention never reads (it checks layers against shape()).
  Result<HeadGroupMap> map = HeadGroupMap::contiguous(shape_.n_layers, shape_.n_kv_head, 1);
  if (!map.ok()) map = HeadGroupMap::contiguous(1, 1, 1);
  map_ = std::make_unique<HeadGroupMap>(std::move(*map));
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
    return make_error("KV cache overflow: {} positions needed, capacity is {}", n_total, capacity_);
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

KvHeadView ContiguousKvCache::head_view(int layer, int kv_head) const {
  KvHeadView v;
  if (layer < 0 || layer >= shape_.n_layers || kv_head < 0 || kv_head >= shape_.n_kv_head) return v;
  const Layer& L = layers_[static_cast<size_t>(layer)];
  const auto head = static_cast<size_t>(kv_head);
  const auto slots = static_cast<size_t>(allocated_);
  v.k_row_bytes = k_row_bytes_;
  v.v_row_bytes = v_row_bytes_;
  const auto* k =
      type_ == KvType::F32 ? reinterpret_cast<const uint8_t*>(L.k32.data()) : L.kb.data();
  const auto* val =
      type_ == KvType::F32 ? reinterpret_cast<const uint8_t*>(L.v32.data()) : L.vb.data();
  v.k_base = k + head * slots * v.k_row_bytes;  // [n_kv_head][allocated_][row]
  v.v_base = val + head * slots * v.v_row_bytes;
  v.head_dim = shape_.head_dim;
  v.length = L.length;
  v.tail_pos0 = 0;  // entry e holds position e
  return v;
}

void ContiguousKvCache::truncate(int64_t n_tokens) {
  n_tokens = std::max<int64_t>(n_tokens, 0);
  for (Layer& L : layers_) L.length = std::min(L.length, n_tokens);
}

}  // namespace tangram
