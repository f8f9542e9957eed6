// Which KV heads share pages (a "head group"), and in which page column each sits.
//
// A head is a (layer, KV head) pair, named by its flat index layer·n_kv_head + kv_head. A group
// lists up to group_size heads in column order; its heads may come from any layers (the global
// clustering of Tangram's paper groups heads of similar budgets wherever they are). One page
// table and one page allocation per token position serve the whole group, each member in its
// own column. A map whose groups each lie in one layer (contiguous runs of G per layer, or a
// per-layer clustering) is the special case and goes through the same code.
//
// Attention runs layer by layer, so the map also keeps, per layer, the groups touching it and
// their members in that layer in column order.
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
  // Per-layer groups: groups[layer][group] = KV heads of that layer in column order. Flat group
  // ids run layer-major. Same checks as from_flat_groups.
  static Result<HeadGroupMap> from_groups(int n_kv_head, int group_size,
                                          const std::vector<std::vector<std::vector<int>>>& groups);
  // Groups of flat heads (layer·n_kv_head + kv_head) in column order, from any layers. Every head
  // must appear exactly once, and no group may be empty or hold more than group_size heads.
  static Result<HeadGroupMap> from_flat_groups(int n_layers, int n_kv_head, int group_size,
                                               const std::vector<std::vector<int>>& groups);

  int n_layers() const { return n_layers_; }
  int n_kv_head() const { return n_kv_head_; }
  int group_size() const { return group_size_; }
  int total_groups() const { return static_cast<int>(member_offset_.size()) - 1; }
  // Flat heads (layer·n_kv_head + kv_head) of a group, in column order.
  std::span<const int> members(int flat_group) const {
    const auto b = static_cast<size_t>(member_offset_[static_cast<size_t>(flat_group)]);
    const auto e = static_cast<size_t>(member_offset_[static_cast<size_t>(flat_group) + 1]);
    return {members_.data() + b, e - b};
  }
  int layer_of_head(int flat_head) const { return flat_head / n_kv_head_; }
  int kv_head_of(int flat_head) const { return flat_head % n_kv_head_; }
  // Largest value, over a group's members, of a per-head array [n_layers][n_kv_head] (the length
  // a group's pages must hold when each head needs its own value).
  template <typename T>
  T group_max(int flat_group, std::span<const T> per_head) const {
    T most{};
    for (int m : members(flat_group)) most = std::max(most, per_head[static_cast<size_t>(m)]);
    return most;
  }
  // Group and page column of one (layer, KV head).
  int group_of(int layer, int kv_head) const { return head_group_[head_index(layer, kv_head)]; }
  int column_of(int layer, int kv_head) const { return head_column_[head_index(layer, kv_head)]; }

  // --- Per layer (attention, per-layer edits) ---
  // A group as seen from one layer: its members in that layer are layer_heads(layer)[begin, end).
  struct LayerGroup {
    int flat_group;
    int begin, end;
  };
  // Groups touching a layer, in ascending flat id.
  std::span<const LayerGroup> layer_groups(int layer) const {
    const auto b = static_cast<size_t>(layer_group_offset_[static_cast<size_t>(layer)]);
    const auto e = static_cast<size_t>(layer_group_offset_[static_cast<size_t>(layer) + 1]);
    return {layer_groups_.data() + b, e - b};
  }
  // The layer's KV heads, group after group (layer_groups order), each group's in column order.
  std::span<const int> layer_heads(int layer) const {
    return {layer_heads_.data() + static_cast<size_t>(layer) * static_cast<size_t>(n_kv_head_),
            static_cast<size_t>(n_kv_head_)};
  }

  // True when every group lies within one layer.
  bool per_layer() const { return per_layer_; }
  // True when every layer uses the contiguous map of group_size.
  bool is_contiguous() const;

 private:
  HeadGroupMap() = default;
  size_t head_index(int layer, int kv_head) const {
    return static_cast<size_t>(layer) * static_cast<size_t>(n_kv_head_) +
           static_cast<size_t>(kv_head);
  }

  int n_layers_ = 0;
  int n_kv_head_ = 0;
  int group_size_ = 0;
  bool per_layer_ = true;
  std::vector<int> member_offset_;        // [total_groups + 1] into members_
  std::vector<int> members_;              // [n_layers * n_kv_head] flat heads, group after group
  std::vector<int> head_group_;           // [n_layers][n_kv_head] flat group
  std::vector<int> head_column_;          // [n_layers][n_kv_head] column in the group's pages
  std::vector<int> layer_group_offset_;   // [n_layers + 1] into layer_groups_
  std::vector<LayerGroup> layer_groups_;  // groups touching each layer, layer after layer
  std::vector<int> layer_heads_;          // [n_layers][n_kv_head] KV heads in layer_groups order
};

}  // namespace tangram
