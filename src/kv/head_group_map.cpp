#include "kv/head_group_map.h"

#include <algorithm>

namespace tangram {

Result<HeadGroupMap> HeadGroupMap::contiguous(int n_layers, int n_kv_head, int group_size) {
  if (n_layers < 1 || n_kv_head < 1 || group_size < 1)
    return make_error("head groups: layers ({}), KV heads ({}) and group size ({}) must be positive",
                      n_layers, n_kv_head, group_size);
  std::vector<std::vector<std::vector<int>>> groups(static_cast<size_t>(n_layers));
  for (auto& layer : groups) {
    for (int h = 0; h < n_kv_head; h += group_size) {
      std::vector<int> g;
      for (int c = h; c < std::min(n_kv_head, h + group_size); ++c) g.push_back(c);
      layer.push_back(std::move(g));
    }
  }
  return from_groups(n_kv_head, group_size, groups);
}

Result<HeadGroupMap> HeadGroupMap::from_groups(
    int n_kv_head, int group_size, const std::vector<std::vector<std::vector<int>>>& groups) {
  if (n_kv_head < 1 || group_size < 1)
    return make_error("head groups: KV heads ({}) and group size ({}) must be positive", n_kv_head,
                      group_size);
  if (groups.empty()) return make_error("head groups: the map lists no layer");
  if (groups.size() > static_cast<size_t>(1 << 20))
    return make_error("head groups: {} layers is implausibly many", groups.size());
  HeadGroupMap m;
  m.n_layers_ = static_cast<int>(groups.size());
  m.n_kv_head_ = n_kv_head;
  m.group_size_ = group_size;
  const size_t n_heads = groups.size() * static_cast<size_t>(n_kv_head);
  m.head_group_.assign(n_heads, -1);
  m.head_column_.assign(n_heads, -1);
  m.layer_first_group_.push_back(0);
  m.member_offset_.push_back(0);
  for (size_t l = 0; l < groups.size(); ++l) {
    const int layer = static_cast<int>(l);
    for (size_t g = 0; g < groups[l].size(); ++g) {
      const std::vector<int>& heads = groups[l][g];
      if (heads.empty()) return make_error("head groups: layer {} group {} is empty", layer, g);
      if (heads.size() > static_cast<size_t>(group_size))
        return make_error("head groups: layer {} group {} has {} heads, more than the group size {}",
                          layer, g, heads.size(), group_size);
      const int flat = static_cast<int>(m.member_offset_.size()) - 1;
      for (size_t c = 0; c < heads.size(); ++c) {
        const int h = heads[c];
        if (h < 0 || h >= n_kv_head)
          return make_error("head groups: layer {} group {} names KV head {} outside [0, {})", layer,
                            g, h, n_kv_head);
        const size_t idx = m.head_index(layer, h);
        if (m.head_group_[idx] >= 0)
          return make_error("head groups: layer {} KV head {} is in more than one group", layer, h);
        m.head_group_[idx] = flat;
        m.head_column_[idx] = static_cast<int>(c);
        m.members_.push_back(h);
      }
      m.member_offset_.push_back(static_cast<int>(m.members_.size()));
    }
    for (int h = 0; h < n_kv_head; ++h)
      if (m.head_group_[m.head_index(layer, h)] < 0)
        return make_error("head groups: layer {} KV head {} is in no group", layer, h);
    m.layer_first_group_.push_back(static_cast<int>(m.member_offset_.size()) - 1);
  }
  return m;
}

bool HeadGroupMap::is_contiguous() const {
  for (int l = 0; l < n_layers_; ++l)
    for (int h = 0; h < n_kv_head_; ++h)
      if (group_of(l, h) != flat_group(l, h / group_size_) || column_of(l, h) != h % group_size_)
        return false;
  return true;
}

}  // namespace tangram
