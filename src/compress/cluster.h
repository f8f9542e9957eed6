// Head-group clustering: which KV heads share a page (digest §5.3, upstream's sorted-chunk
// algorithm). Heads sharing a page must share one kept length, the largest of the group, so
// grouping heads of similar retention wastes less memory than grouping neighbours.
//
//  per-layer scope: in each layer sort heads by (-score, h); cluster = l·(H/G) + rank / G
//  global scope:    sort every (l, h) by (-score, l, h);     cluster = rank / G
//  columns:         inside a cluster, members in (l, h) ascending order; column = index
//
// Maps use the shared "tangram-profile-json/v1" format, kind "cluster_map"
// (../shared/profiles/README.md). Every shipped map is exactly cluster_heads() applied to the
// sibling profile's median retention (the tests check all of them).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "compress/profile.h"
#include "kv/head_group_map.h"

namespace tangram {

struct ClusterMap {
  int n_layers = 0, n_kv_head = 0, group_size = 0;  // L profiled layers, H heads, G heads per cluster
  bool global = false;                // clusters may mix layers (global scope) or not (per-layer)
  std::vector<int32_t> cluster_of;    // [L][H] cluster id, 0 .. L·H/G - 1
  std::vector<int32_t> column_of;     // [L][H] column inside the cluster's page, 0 .. G - 1
  std::vector<float> rank_score;      // [L][H] the score that was clustered (may be empty)
  std::vector<int64_t> layer_ids;     // [L] physical layer ids (meta.static_layer_ids; may be empty)
  double base_ratio = 0;              // informational: the profiled ratio the score came from

  int n_clusters() const { return group_size > 0 ? n_layers * n_kv_head / group_size : 0; }
  size_t head_index(int l, int h) const {
    return static_cast<size_t>(l) * static_cast<size_t>(n_kv_head) + static_cast<size_t>(h);
  }
  // members()[c][col] = flat head index l·H + h; the map must be valid.
  std::vector<std::vector<int>> members() const;
};

// Checks that (cluster_of, column_of) is a bijection onto every (cluster, column) slot (every
// cluster has exactly G members) and, for a per-layer map, that no cluster mixes layers. The
// (l, h) column order that clustering produces is not required: any order is a valid page layout.
Status validate_cluster_map(const ClusterMap& m);

// Sorted-chunk clustering of score [L][H] into clusters of G. Needs H % G == 0 (per-layer) or
// (L·H) % G == 0 (global), and finite scores.
Result<ClusterMap> cluster_heads(std::span<const float> score /*[L][H]*/, int n_layers, int n_kv_head,
                                 int group_size, bool global);

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
Result<double> sample_grouping_waste(const RetentionProfile& p, const ClusterMap& m, WasteUnit unit);

// Optional provenance written into a map file's meta.
struct ClusterMapMeta {
  std::string scorer, model, name;  // name defaults to pg<G>_r<ratio>[_perlayer]
  std::string source_profile;
  bool has_stability = false;       // write rank_stability from `stability`
  ProfileStability stability;
};

Result<ClusterMap> load_cluster_map(const std::string& path);
// Writes the map (validated first) with cluster_members and, when rank_score is present,
// meta.over_allocation of the map on that score.
Status save_cluster_map(const ClusterMap& m, const std::string& path, const ClusterMapMeta& meta = {});

// The engine's per-layer head groups for a model of n_layers_physical layers: profiled layer l is
// physical layer layer_ids[l]; its groups are its clusters in id order, heads in column order.
// Unprofiled layers (e.g. sliding-window layers of a hybrid model) get contiguous groups of G.
// A map whose clusters mix layers cannot convert: Tangram's pages hold one layer's heads.
Result<HeadGroupMap> to_head_group_map(const ClusterMap& m, int n_layers_physical,
                                       std::span<const int64_t> layer_ids);

}  // namespace tangram
