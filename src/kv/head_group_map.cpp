#include "kv/head_group_map.h"

#include <algorithm>

namespace tangram {

namespace {

// More heads than this would only come from a corrupt map; it also keeps L·H within int.
constexpr int64_t kMaxHeads = int64_t{1} << 24;

}  // namespace

Result<HeadGroupMap> HeadGroupMap::contiguous(int n_layers, int n_kv_head, int group_size) {
  if (n_layers < 1 || n_kv_head < 1 || group_size < 1)
    return make_error(
        "head groups: layers ({}), KV heads ({}) and group size ({}) must be positive", n_layers,
        n_kv_head, group_size);
  if (int64_t{n_layers} * n_kv_head > kMaxHeads)
    return make_error("head groups: {} x {} heads is implausibly many", n_layers, n_kv_head);
  std::vector<std::vector<int>> groups;
  for (int l = 0; l < n_layers; ++l)
    for (int h = 0; h < n_kv_head; h += group_size) {
      std::vector<int> g;
      for (int c = h; c < std::min(n_kv_head, h + group_size); ++c) g.push_back(l * n_kv_head + c);
      groups.push_back(std::move(g));
    }
  return from_flat_groups(n_layers, n_kv_head, group_size, groups);
}

Result<HeadGroupMap> HeadGroupMap::from_groups(
    int n_kv_head, int group_size, const std::vector<std::vector<std::vector<int>>>& groups) {
  if (n_kv_head < 1) return make_error("head groups: KV heads ({}) must be positive", n_kv_head);
  if (groups.empty()) return make_error("head groups: the map lists no layer");
  if (static_cast<int64_t>(groups.size()) * n_kv_head > kMaxHeads)
    return make_error("head groups: {} layers is implausibly many", groups.size());
  std::vector<std::vector<int>> flat;
  for (size_t l = 0; l < groups.size(); ++l)
    for (size_t g = 0; g < groups[l].size(); ++g) {
      std::vector<int> heads = groups[l][g];
      for (int& h : heads) {
        if (h < 0 || h >= n_kv_head)
          return make_error("head groups: layer {} group {} names KV head {} outside [0, {})", l, g,
                            h, n_kv_head);
        h += static_cast<int>(l) * n_kv_head;
      }
      flat.push_back(std::move(heads));
    }
  return from_flat_groups(static_cast<int>(groups.size()), n_kv_head, group_size, flat);
}

Result<HeadGroupMap> HeadGroupMap::from_flat_groups(int n_layers, int n_kv_head, int group_size,
                                                    const std::vector<std::vector<int>>& groups) {
  if (n_layers < 1 || n_kv_head < 1 || group_size < 1)
    return make_error(
        "head groups: layers ({}), KV heads ({}) and group size ({}) must be positive", n_layers,
        n_kv_head, group_size);
  if (int64_t{n_layers} * n_kv_head > kMaxHeads)
    return make_error("head groups: {} x {} heads is implausibly many", n_layers, n_kv_head);
  HeadGroupMap m;
  m.n_layers_ = n_layers;
  m.n_kv_head_ = n_kv_head;
  m.group_size_ = group_size;
  const int n_heads = n_layers * n_kv_head;
  m.head_group_.assign(static_cast<size_t>(n_heads), -1);
  m.head_column_.assign(static_cast<size_t>(n_heads), -1);
  m.member_offset_.push_back(0);
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<int>& heads = groups[g];
    if (heads.empty()) return make_error("head groups: group {} is empty", g);
    if (heads.size() > static_cast<size_t>(group_size))
      return make_error("head groups: group {} has {} heads, more than the group size {}", g,
                        heads.size(), group_size);
    for (size_t c = 0; c < heads.size(); ++c) {
      const int f = heads[c];
      if (f < 0 || f >= n_heads)
        return make_error("head groups: group {} names head {} outside [0, {} x {})", g, f,
                          n_layers, n_kv_head);
      if (m.head_group_[static_cast<size_t>(f)] >= 0)
        return make_error("head groups: layer {} KV head {} is in more than one group",
                          f / n_kv_head, f % n_kv_head);
      m.head_group_[static_cast<size_t>(f)] = static_cast<int>(g);
      m.head_column_[static_cast<size_t>(f)] = static_cast<int>(c);
      m.members_.push_back(f);
      m.per_layer_ = m.per_layer_ && f / n_kv_head == heads[0] / n_kv_head;
    }
    m.member_offset_.push_back(static_cast<int>(m.members_.size()));
  }
  for (int f = 0; f < n_heads; ++f)
    if (m.head_group_[static_cast<size_t>(f)] < 0)
      return make_error("head groups: layer {} KV head {} is in no group", f / n_kv_head,
                        f % n_kv_head);
  // Per layer: the groups touching it in ascending id, each with its members there in column
  // order (members_ is already in column order within a group).
  m.layer_group_offset_.assign(static_cast<size_t>(n_layers) + 1, 0);
  m.layer_heads_.reserve(static_cast<size_t>(n_heads));
  std::vector<std::vector<LayerGroup>> per_layer(static_cast<size_t>(n_layers));
  std::vector<std::vector<int>> heads_of(static_cast<size_t>(n_layers));
  for (int g = 0; g < m.total_groups(); ++g)
    for (const int f : m.members(g)) {
      const auto l = static_cast<size_t>(f / n_kv_head);
      std::vector<LayerGroup>& lg = per_layer[l];
      const int at = static_cast<int>(heads_of[l].size());
      if (lg.empty() || lg.back().flat_group != g) lg.push_back({g, at, at});
      heads_of[l].push_back(f % n_kv_head);
      ++lg.back().end;
    }
  for (size_t l = 0; l < per_layer.size(); ++l) {
    m.layer_groups_.insert(m.layer_groups_.end(), per_layer[l].begin(), per_layer[l].end());
    m.layer_heads_.insert(m.layer_heads_.end(), heads_of[l].begin(), heads_of[l].end());
    m.layer_group_offset_[l + 1] = static_cast<int>(m.layer_groups_.size());
  }
  return m;
}

bool HeadGroupMap::is_contiguous() const {
  const int per_layer_groups = (n_kv_head_ + group_size_ - 1) / group_size_;
  for (int l = 0; l < n_layers_; ++l)
    for (int h = 0; h < n_kv_head_; ++h)
      if (group_of(l, h) != l * per_layer_groups + h / group_size_ ||
          column_of(l, h) != h % group_size_)
        return false;
  return true;
}

}  // namespace tangram
