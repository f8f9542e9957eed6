// Which KV heads of a layer share pages (a "head group"), and in which page column each sits.
//
// The default map cuts each layer's heads into contiguous runs of G (the last run may be
// shorter); G = n_kv_head is the classic unified page of vLLM and goes through the same code.
// An arbitrary map (e.g. heads clustered by similar KV budgets) lists, per layer, the groups
// and in each the KV heads in column order. Groups never span layers.
#pragma once

#include <algorithm>

#include <cstdint>
#include <span>
#include <vector>

#include "common/result.h"

namespace tangram {

class HeadGroupMap {
 public:
  // Contiguous runs of group_size heads per layer.
  static Result<HeadGroupMap> contiguous(int n_layers, int n_kv_head, int group_size);
  // groups[layer][group] = KV heads in column order. Every head of every layer must appear
  // exactly once, and no group may be empty or hold more than group_size heads.
  static Result<HeadGroupMap> from_groups(int n_kv_head, int group_size,
                                          const std::vector<std::vector<std::vector<int>>>& groups);

  int n_layers() const { return n_layers_; }
  int n_kv_head() const { return n_kv_head_; }
  int group_size() const { return group_size_; }
  // Groups of one layer, and of all layers together.
  int n_groups(int layer) const {
    return layer_first_group_[static_cast<size_t>(layer) + 1] - layer_first_group_[static_cast<size_t>(layer)];
  }
  int total_groups() const { return layer_first_group_.back(); }
  // Layer of a flat group.
  int layer_of(int flat_group) const {
    return static_cast<int>(std::upper_bound(layer_first_group_.begin(), layer_first_group_.end(), flat_group) -
                            layer_first_group_.begin()) - 1;
  }
  // Largest value, over a flat group's members, of a per-head array [n_layers][n_kv_head] (the
  // length a group's pages must hold when each head needs its own value).
  template <typename T>
  T group_max(int flat_group, std::span<const T> per_head) const {
    const size_t base = static_cast<size_t>(layer_of(flat_group)) * static_cast<size_t>(n_kv_head_);
    T most{};
    for (int h : members(flat_group)) most = std::max(most, per_head[base + static_cast<size_t>(h)]);
    return most;
  }
  // Index of (layer, group) among all groups, layer-major: 0 .. total_groups()-1.
  int flat_group(int layer, int group) const {
    return layer_first_group_[static_cast<size_t>(layer)] + group;
  }
  // KV heads of a flat group, in column order.
  std::span<const int> members(int flat_group) const {
    const auto b = static_cast<size_t>(member_offset_[static_cast<size_t>(flat_group)]);
    const auto e = static_cast<size_t>(member_offset_[static_cast<size_t>(flat_group) + 1]);
    return {members_.data() + b, e - b};
  }
  // Flat group and page column of one (layer, KV head).
  int group_of(int layer, int kv_head) const { return head_group_[head_index(layer, kv_head)]; }
  int column_of(int layer, int kv_head) const { return head_column_[head_index(layer, kv_head)]; }
  // True when every layer uses the contiguous map of group_size.
  bool is_contiguous() const;

 private:
  HeadGroupMap() = default;
  size_t head_index(int layer, int kv_head) const {
    return static_cast<size_t>(layer) * static_cast<size_t>(n_kv_head_) + static_cast<size_t>(kv_head);
  }

  int n_layers_ = 0;
  int n_kv_head_ = 0;
  int group_size_ = 0;
  std::vector<int> layer_first_group_;  // [n_layers + 1]
  std::vector<int> member_offset_;      // [total_groups + 1] into members_
  std::vector<int> members_;            // [n_layers * n_kv_head] heads, group after group
  std::vector<int> head_group_;         // [n_layers][n_kv_head] flat group
  std::vector<int> head_column_;        // [n_layers][n_kv_head] column in the group's pages
};

}  // namespace tangram
