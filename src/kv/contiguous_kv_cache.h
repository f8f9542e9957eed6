// The simple KvCache: per layer, keys stored as [n_kv_head][allocated][head_dim] and values as
// [n_kv_head][allocated][head_dim_v], as floats (F32) or as the type's encoded rows (F16, Q8_0:
// kv_row.h). Storage grows by doubling up to capacity on reserve(), so a long context costs
// memory only when it is used. Every KV head of a layer has the same length, and no heads share
// storage: each head is a one-member group, its view one dense run of rows.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kv/head_group_map.h"
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
  KvHeadView head_view(int layer, int kv_head) const override;
  const HeadGroupMap& head_groups() const override { return *map_; }
  void truncate(int64_t n_tokens) override;

  // Positions for which memory is allocated now (<= capacity).
  int64_t allocated() const { return allocated_; }

 private:
  struct Layer {
    // Exactly one pair is used, per type_.
    std::vector<float> k32, v32;  // [n_kv_head][allocated_][head_dim | head_dim_v]
    std::vector<uint8_t> kb, vb;  // [n_kv_head][allocated_][key | value row bytes]
    int64_t length = 0;
  };
  KvShape shape_;
  int64_t capacity_;
  KvType type_;
  size_t k_row_bytes_, v_row_bytes_;  // row sizes in bytes
  int64_t allocated_ = 0;
  std::vector<Layer> layers_;
  std::unique_ptr<HeadGroupMap> map_;  // one head per group
};

}  // namespace tangram
