// Head-group clustering: which KV heads share a page (digest §5.3, upstream's sorted-chunk
// algorithm). Heads sharing a page must share one kept length, the largest of the group, so
// grouping heads of similar retention wastes less memory than grouping neighbours.
//
//  per-layer scope: in each layer sort heads by (-score, h); cluster = l·(H/G) + rank / G
//  global scope:    sort every (l, h) by (-score, l, h);     cluster = rank / G
//  columns:         inside a cluster, members in (l, h) ascending order; column = index
//
// Maps use the shared "tangram-profile-json/v1" format, kind "cluster_map"
// (data/profiles/README.md). Every shipped map is exactly cluster_heads() applied to the
// sibling profile's median retention (the tests check all of them).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "compress/profile.h"
#include "kv/head_group_map.h"

namespace tangram {

struct ClusterMap {
  int n_layers = 0, n_kv_head = 0,
      group_size = 0;               // L profiled layers, H heads, G heads per cluster
  bool global = false;              // clusters may mix layers (global scope) or not (per-layer)
  std::vector<int32_t> cluster_of;  // [L][H] cluster id, 0 .. L·H/G - 1
  std::vector<int32_t> column_of;   // [L][H] column inside the cluster's page, 0 .. G - 1
  std::vector<float> rank_score;    // [L][H] the score that was clustered (may be empty)
  std::vector<int64_t> layer_ids;   // [L] physical layer ids (meta.static_layer_ids; may be empty)
  double base_ratio = 0;            // informational: the profiled ratio the score came from

  // ceil(L·H / G): a global map's last cluster holds the remainder when G does not divide L·H.
  int n_clusters() const {
    return group_size > 0 ? (n_layers * n_kv_head + group_size - 1) / group_size : 0;
  }
  int cluster_size(int c) const {
    return std::min(group_size, n_layers * n_kv_head - c * group_size);
  }
  size_t head_index(int l, int h) const {
    return static_cast<size_t>(l) * static_cast<size_t>(n_kv_head) + static_cast<size_t>(h);
  }
  // members()[c][col] = flat head index l·H + h; the map must be valid.
  std::vector<std::vector<int>> members() const;
};

// Checks that (cluster_of, column_of) is a bijection onto the (cluster, column) slots (every
// cluster has exactly G members, except a global map's last, which holds the remainder of L·H
// heads) and, for a per-layer map, that no cluster mixes layers. The
// (l, h) column order that clustering produces is not required: any order is a valid page layout.
Status validate_cluster_map(const ClusterMap& m);

// Sorted-chunk clustering of score [L][H] into clusters of G. Needs H % G == 0 (per-layer) and
// finite scores; globally the last cluster holds the remainder when G does not divide L·H.
Result<ClusterMap> cluster_heads(std::span<const float> score /*[L][H]*/, int n_layers,
                                 int n_kv_head, int group_size, bool global);

// The identity grouping: runs of G consecutive heads in (l, h) order, cluster = (l·H + h) / G.
// Per-layer when H % G == 0; a G that is a multiple of H (e.g. G = L·H, one length for the whole
// model) spans whole layers and gives a global map. Needs (L·H) % G == 0.
Result<ClusterMap> contiguous_map(int n_layers, int n_kv_head, int group_size);

// Over-allocation of a grouping: (Σ_c G·max_{m∈c} score_m − Σ score) / Σ_c G·max score, 0 when the
// allocation is 0. score: [L][H] non-negative.
Result<double> grouping_waste(std::span<const float> score /*[L][H]*/, const ClusterMap& m);
Result<double> grouping_waste(std::span<const double> score /*[L][H]*/, const ClusterMap& m);

// What the per-sample (token) waste is measured on.
enum class WasteUnit {
  KeptTokens,  // raw_kept: actual kept tokens, sink and window included (digest §5.4)
  Retention,   // raw_ratio: context-only retention
};
// The grouping fixed, the waste of each sample's values, averaged over samples (digest §5.4's
// figures in parentheses). KeptTokens needs raw_kept.
Result<double> sample_grouping_waste(const RetentionProfile& p, const ClusterMap& m,
                                     WasteUnit unit);

// Optional provenance written into a map file's meta.
struct ClusterMapMeta {
  std::string scorer, model, name;  // name defaults to pg<G>_r<ratio>[_perlayer]
  std::string source_profile;
  bool has_stability = false;  // write rank_stability from `stability`
  ProfileStability stability;
};

Result<ClusterMap> load_cluster_map(const std::string& path);
// Writes the map (validated first; a short last cluster is refused: the format has none) with
// cluster_members and, when rank_score is present, meta.over_allocation of the map on that score.
Status save_cluster_map(const ClusterMap& m, const std::string& path,
                        const ClusterMapMeta& meta = {});

// The engine's head groups for a model of n_layers_physical layers: profiled layer l is physical
// layer layer_ids[l]; each cluster is a group (heads in column order, from any layers for a
// global map). Unprofiled layers (e.g. sliding-window layers of a hybrid model) get contiguous
// groups of G. Groups are ordered by the layer of their first column, clusters in id order.
Result<HeadGroupMap> to_head_group_map(const ClusterMap& m, int n_layers_physical,
                                       std::span<const int64_t> layer_ids);

}  // namespace tangram
