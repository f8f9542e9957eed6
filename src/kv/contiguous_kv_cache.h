// The simple KvCache: per layer, keys stored as [n_kv_head][allocated][head_dim] and values as
// [n_kv_head][allocated][head_dim_v], as floats (F32) or as the type's encoded rows (F16, Q8_0:
// kv_row.h). Storage grows by doubling up to capacity
// on reserve(), so a long context costs memory only when it is used. Every KV head of a layer
// has the same length.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kv/kv_cache.h"

namespace tangram {

class ContiguousKvCache final : public KvCache {
 public:
  // capacity: most positions the sequence may reach (> 0). The head sizes must suit the type
  // (check_kv_row_dims).
  ContiguousKvCache(const KvShape& shape, int64_t capacity, KvType type);

  const KvShape& shape() const override { return shape_; }
  KvType type() const override { return type_; }
  int64_t capacity() const override { return capacity_; }
  int64_t n_positions() const override;
  int64_t length(int layer, int kv_head) const override;
  Status reserve(int64_t n_total) override;
  Status write(int layer, int64_t pos0, const float* k, const float* v, int64_t n) override;
  void attend(int layer, const float* q, int64_t n, int64_t pos0, float* out,
              ThreadPool& pool) const override;
  void truncate(int64_t n_tokens) override;

  // Positions for which memory is allocated now (<= capacity).
  int64_t allocated() const { return allocated_; }

 private:
  struct Layer {
    // Exactly one pair is used, per type_.
    std::vector<float> k32, v32;     // [n_kv_head][allocated_][head_dim | head_dim_v]
    std::vector<uint8_t> kb, vb;     // [n_kv_head][allocated_][key | value row bytes]
    int64_t length = 0;
  };
  // Per-thread working memory of attend().
  struct Scratch {
    std::vector<float> scores;  // [group][allocated_]: one row per query head of a group
    std::vector<float> k_row;   // [head_dim]   (encoded rows widened to float)
    std::vector<float> v_row;   // [head_dim_v]
  };

  // Attention for one token and one slice [h_begin, h_end) of query heads that share kv_head.
  void attend_slice(const Layer& layer, int kv_head, int h_begin, int h_end, const float* q_tok,
                    int64_t n_keys, float* out_tok, Scratch& s) const;
  void ensure_scratch(int n_threads) const;

  KvShape shape_;
  int64_t capacity_;
  KvType type_;
  size_t k_row_bytes_, v_row_bytes_;  // encoded row sizes (unused for F32)
  int64_t allocated_ = 0;
  std::vector<Layer> layers_;
  mutable std::vector<Scratch> scratch_;
  mutable int64_t scratch_allocated_ = 0;
};

}  // namespace tangram
