#include "compress/cluster.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "compress/profile_json.h"

namespace tangram {
namespace {

using json = nlohmann::json;

// More heads than this would only come from a corrupt file; it also keeps L·H within int.
constexpr int64_t kMaxHeads = int64_t{1} << 24;

Status check_dims(int n_layers, int n_kv_head, int group_size) {
  if (n_layers < 1 || n_kv_head < 1 || group_size < 1)
    return make_error(
        "head clustering: layers ({}), KV heads ({}) and group size ({}) must be positive",
        n_layers, n_kv_head, group_size);
  if (static_cast<int64_t>(n_layers) * n_kv_head > kMaxHeads)
    return make_error("head clustering: {} x {} heads is implausibly many", n_layers, n_kv_head);
  return Status::Ok();
}

// Columns: members of each cluster in (l, h) = flat-index order.
void assign_columns(ClusterMap& m) {
  std::vector<int32_t> next(static_cast<size_t>(m.n_clusters()), 0);
  m.column_of.assign(m.cluster_of.size(), 0);
  for (size_t i = 0; i < m.cluster_of.size(); ++i)
    m.column_of[i] = next[static_cast<size_t>(m.cluster_of[i])]++;
}

// Does any cluster hold heads of two layers? The map must be a valid bijection.
bool mixes_layers(const ClusterMap& m) {
  std::vector<int> layer_of_cluster(static_cast<size_t>(m.n_clusters()), -1);
  for (int l = 0; l < m.n_layers; ++l)
    for (int h = 0; h < m.n_kv_head; ++h) {
      int& owner = layer_of_cluster[static_cast<size_t>(m.cluster_of[m.head_index(l, h)])];
      if (owner >= 0 && owner != l) return true;
      owner = l;
    }
  return false;
}

template <typename T>
Result<double> waste_of(std::span<const T> score, const ClusterMap& m) {
  TG_TRY(validate_cluster_map(m));
  if (score.size() != static_cast<size_t>(m.n_layers) * static_cast<size_t>(m.n_kv_head))
    return make_error("grouping waste: {} scores for a map of {} x {} heads", score.size(),
                      m.n_layers, m.n_kv_head);
  std::vector<double> cluster_max(static_cast<size_t>(m.n_clusters()), 0.0);
  double ideal = 0;
  for (size_t i = 0; i < score.size(); ++i) {
    const double x = static_cast<double>(score[i]);
    if (!std::isfinite(x) || x < 0)
      return make_error("grouping waste: score {} of head {} is not a finite non-negative value", x,
                        i);
    ideal += x;
    double& mx = cluster_max[static_cast<size_t>(m.cluster_of[i])];
    mx = std::max(mx, x);
  }
  // A cluster allocates its size (G, or fewer for a global map's last) times its largest score.
  double allocated = 0;
  for (size_t c = 0; c < cluster_max.size(); ++c)
    allocated += static_cast<double>(m.cluster_size(static_cast<int>(c))) * cluster_max[c];
  return allocated > 0 ? (allocated - ideal) / allocated : 0.0;
}

std::string default_map_name(const ClusterMap& m) {
  return fmt::format("pg{}_r{:g}{}", m.group_size, m.base_ratio, m.global ? "" : "_perlayer");
}

}  // namespace

std::vector<std::vector<int>> ClusterMap::members() const {
  std::vector<std::vector<int>> out(static_cast<size_t>(n_clusters()));
  for (size_t c = 0; c < out.size(); ++c)
    out[c].assign(static_cast<size_t>(cluster_size(static_cast<int>(c))), -1);
  for (size_t i = 0; i < cluster_of.size(); ++i)
    out[static_cast<size_t>(cluster_of[i])][static_cast<size_t>(column_of[i])] =
        static_cast<int>(i);
  return out;
}

Status validate_cluster_map(const ClusterMap& m) {
  TG_TRY(check_dims(m.n_layers, m.n_kv_head, m.group_size));
  const size_t heads = static_cast<size_t>(m.n_layers) * static_cast<size_t>(m.n_kv_head);
  if (!m.global && heads % static_cast<size_t>(m.group_size) != 0)
    return make_error("cluster map: {} heads do not split into per-layer groups of {}", heads,
                      m.group_size);
  if (m.cluster_of.size() != heads || m.column_of.size() != heads)
    return make_error(
        "cluster map: cluster_of / column_of hold {} / {} values, expected {} ({} x {})",
        m.cluster_of.size(), m.column_of.size(), heads, m.n_layers, m.n_kv_head);
  if (!m.rank_score.empty() && m.rank_score.size() != heads)
    return make_error("cluster map: rank_score holds {} values, expected {}", m.rank_score.size(),
                      heads);
  if (!m.layer_ids.empty() && m.layer_ids.size() != static_cast<size_t>(m.n_layers))
    return make_error("cluster map: {} layer ids for {} layers", m.layer_ids.size(), m.n_layers);
  const int n_clusters = m.n_clusters();
  // [cluster][column] → flat head; a global map's last cluster may leave trailing slots empty.
  std::vector<int> slot_head(static_cast<size_t>(n_clusters) * static_cast<size_t>(m.group_size),
                             -1);
  for (size_t i = 0; i < heads; ++i) {
    const int c = m.cluster_of[i], col = m.column_of[i];
    const int l = static_cast<int>(i) / m.n_kv_head, h = static_cast<int>(i) % m.n_kv_head;
    if (c < 0 || c >= n_clusters)
      return make_error("cluster map: head ({}, {}) is in cluster {}, outside [0, {})", l, h, c,
                        n_clusters);
    if (col < 0 || col >= m.group_size)
      return make_error("cluster map: head ({}, {}) has column {}, outside [0, {})", l, h, col,
                        m.group_size);
    int& owner = slot_head[static_cast<size_t>(c) * static_cast<size_t>(m.group_size) +
                           static_cast<size_t>(col)];
    if (owner >= 0)
      return make_error(
          "cluster map is not a bijection: cluster {} column {} holds both head ({}, {}) and ({}, "
          "{})",
          c, col, owner / m.n_kv_head, owner % m.n_kv_head, l, h);
    owner = static_cast<int>(i);
  }
  // No slot is taken twice, so `heads` placements fill the first `heads` slots only if each is set.
  for (size_t k = 0; k < heads; ++k)
    if (slot_head[k] < 0)
      return make_error(
          "cluster map: cluster {} column {} is empty (only the last cluster may be short)",
          k / static_cast<size_t>(m.group_size), k % static_cast<size_t>(m.group_size));
  if (!m.global && mixes_layers(m))
    return make_error("cluster map: a per-layer map has a cluster with heads of two layers");
  return Status::Ok();
}

Result<ClusterMap> cluster_heads(std::span<const float> score, int n_layers, int n_kv_head,
                                 int group_size, bool global) {
  TG_TRY(check_dims(n_layers, n_kv_head, group_size));
  const size_t heads = static_cast<size_t>(n_layers) * static_cast<size_t>(n_kv_head);
  if (score.size() != heads)
    return make_error("head clustering: {} scores for {} x {} heads", score.size(), n_layers,
                      n_kv_head);
  if (!global && n_kv_head % group_size != 0)
    return make_error(
        "head clustering: {} KV heads per layer do not split into per-layer groups of {} heads "
        "(use the global scope or a divisor of {})",
        n_kv_head, group_size, n_kv_head);
  for (size_t i = 0; i < heads; ++i)
    if (!std::isfinite(score[i]))
      return make_error("head clustering: the score of head ({}, {}) is not finite",
                        i / static_cast<size_t>(n_kv_head), i % static_cast<size_t>(n_kv_head));

  ClusterMap m;
  m.n_layers = n_layers;
  m.n_kv_head = n_kv_head;
  m.group_size = group_size;
  m.global = global;
  m.rank_score.assign(score.begin(), score.end());
  m.cluster_of.assign(heads, 0);
  // Stable sort by descending score keeps ties in flat (l, h) order: the (-score, l, h) key.
  auto by_score = [&](int a, int b) {
    return score[static_cast<size_t>(a)] > score[static_cast<size_t>(b)];
  };
  if (global) {
    std::vector<int> order(heads);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), by_score);
    for (size_t r = 0; r < heads; ++r)
      m.cluster_of[static_cast<size_t>(order[r])] =
          static_cast<int32_t>(r / static_cast<size_t>(group_size));
  } else {
    const int per_layer = n_kv_head / group_size;
    std::vector<int> order(static_cast<size_t>(n_kv_head));
    for (int l = 0; l < n_layers; ++l) {
      std::iota(order.begin(), order.end(), l * n_kv_head);
      std::stable_sort(order.begin(), order.end(), by_score);
      for (int r = 0; r < n_kv_head; ++r)
        m.cluster_of[static_cast<size_t>(order[static_cast<size_t>(r)])] =
            l * per_layer + r / group_size;
    }
  }
  assign_columns(m);
  return m;
}

Result<ClusterMap> contiguous_map(int n_layers, int n_kv_head, int group_size) {
  TG_TRY(check_dims(n_layers, n_kv_head, group_size));
  const size_t heads = static_cast<size_t>(n_layers) * static_cast<size_t>(n_kv_head);
  if (heads % static_cast<size_t>(group_size) != 0)
    return make_error("contiguous grouping: {} x {} heads do not split into groups of {}", n_layers,
                      n_kv_head, group_size);
  ClusterMap m;
  m.n_layers = n_layers;
  m.n_kv_head = n_kv_head;
  m.group_size = group_size;
  m.global = n_kv_head % group_size != 0;  // groups that span layers
  m.cluster_of.resize(heads);
  m.column_of.resize(heads);
  for (size_t i = 0; i < heads; ++i) {
    m.cluster_of[i] = static_cast<int32_t>(i / static_cast<size_t>(group_size));
    m.column_of[i] = static_cast<int32_t>(i % static_cast<size_t>(group_size));
  }
  return m;
}

Result<double> grouping_waste(std::span<const float> score, const ClusterMap& m) {
  return waste_of(score, m);
}
Result<double> grouping_waste(std::span<const double> score, const ClusterMap& m) {
  return waste_of(score, m);
}

Result<double> sample_grouping_waste(const RetentionProfile& p, const ClusterMap& m,
                                     WasteUnit unit) {
  TG_TRY(validate_profile(p));
  if (p.n_layers != m.n_layers || p.n_kv_head != m.n_kv_head)
    return make_error("sample waste: the profile has {} x {} heads, the map {} x {}", p.n_layers,
                      p.n_kv_head, m.n_layers, m.n_kv_head);
  if (unit == WasteUnit::KeptTokens && p.raw_kept.empty())
    return make_error("sample waste: the profile has no raw_kept (per-sample kept tokens)");
  const size_t heads = static_cast<size_t>(p.n_heads());
  std::vector<double> values(heads);  // [L][H] one sample
  double sum = 0;
  for (int s = 0; s < p.n_samples; ++s) {
    const size_t base = static_cast<size_t>(s) * heads;
    for (size_t i = 0; i < heads; ++i)
      values[i] = unit == WasteUnit::KeptTokens ? static_cast<double>(p.raw_kept[base + i])
                                                : p.raw_ratio[base + i];
    TG_ASSIGN(const double w, grouping_waste(std::span<const double>(values), m));
    sum += w;
  }
  return sum / p.n_samples;
}

Result<ClusterMap> load_cluster_map(const std::string& path) {
  TG_ASSIGN(const ProfileJsonDoc doc, read_profile_json(path, "cluster_map"));
  TG_ASSIGN(const JsonArray* cluster_of, doc.array("cluster_of", "int32", {-1, -1}));
  const int64_t L = cluster_of->shape[0], H = cluster_of->shape[1];
  TG_ASSIGN(const JsonArray* column_of, doc.array("column_of", "int32", {L, H}));
  TG_ASSIGN(const JsonArray* g_arr, doc.array("page_group_size", "int32", {}));
  const int64_t G = static_cast<int64_t>(g_arr->data[0]);
  if (L < 1 || H < 1 || G < 1 || L * H > kMaxHeads || (L * H) % G != 0)
    return make_error("{}: {} x {} heads do not split into groups of page_group_size {}", path, L,
                      H, G);
  TG_ASSIGN(const JsonArray* members, doc.array("cluster_members", "int32", {L * H / G, G, 2}));

  ClusterMap m;
  m.n_layers = static_cast<int>(L);
  m.n_kv_head = static_cast<int>(H);
  m.group_size = static_cast<int>(G);
  for (double x : cluster_of->data) m.cluster_of.push_back(static_cast<int32_t>(x));
  for (double x : column_of->data) m.column_of.push_back(static_cast<int32_t>(x));
  if (doc.arrays.count("rank_score")) {
    TG_ASSIGN(const JsonArray* rs, doc.array("rank_score", "float32", {L, H}));
    for (double x : rs->data) m.rank_score.push_back(static_cast<float>(x));
  }
  if (doc.arrays.count("base_ratio")) {
    TG_ASSIGN(const JsonArray* br, doc.array("base_ratio", "float32", {}));
    m.base_ratio = br->data[0];
  }
  if (const auto ids = doc.meta.find("static_layer_ids");
      ids != doc.meta.end() && ids->is_array()) {
    if (static_cast<int64_t>(ids->size()) != L)
      return make_error("{}: meta.static_layer_ids lists {} layers, the arrays {}", path,
                        ids->size(), L);
    for (const json& id : *ids) {
      if (!id.is_number_integer())
        return make_error("{}: meta.static_layer_ids holds a non-integer", path);
      m.layer_ids.push_back(id.get<int64_t>());
    }
  }
  const auto scope = doc.meta.find("cluster_scope");
  if (scope != doc.meta.end() && scope->is_string()) {
    const std::string s = scope->get<std::string>();
    if (s == "global")
      m.global = true;
    else if (s == "per_layer" || s == "per-layer")
      m.global = false;
    else
      return make_error("{}: meta.cluster_scope '{}' is neither 'global' nor 'per_layer'", path, s);
  } else {
    m.global =
        true;  // no scope recorded: accept any valid map, then call it per-layer if it is one
  }
  if (Status st = validate_cluster_map(m); !st.ok())
    return make_error("{}: {}", path, st.message());
  if (scope == doc.meta.end() && !mixes_layers(m)) m.global = false;

  // cluster_members must be the inverse of (cluster_of, column_of).
  for (int64_t c = 0; c < L * H / G; ++c)
    for (int64_t col = 0; col < G; ++col) {
      const size_t at = static_cast<size_t>((c * G + col) * 2);
      const double l = members->data[at], h = members->data[at + 1];
      const bool in_range =
          l >= 0 && l < static_cast<double>(L) && h >= 0 && h < static_cast<double>(H);
      const size_t i = in_range ? m.head_index(static_cast<int>(l), static_cast<int>(h)) : 0;
      if (!in_range || m.cluster_of[i] != c || m.column_of[i] != col)
        return make_error(
            "{}: cluster_members[{}, {}] = ({}, {}) disagrees with cluster_of / column_of", path, c,
            col, l, h);
    }
  return m;
}

Status save_cluster_map(const ClusterMap& m, const std::string& path, const ClusterMapMeta& meta) {
  TG_TRY(validate_cluster_map(m));
  if ((int64_t{m.n_layers} * m.n_kv_head) % m.group_size != 0)
    return make_error(
        "cluster map: {} x {} heads leave a last cluster shorter than {}, which the shared map "
        "format (cluster_members [C][G][2]) cannot hold",
        m.n_layers, m.n_kv_head, m.group_size);
  const int64_t L = m.n_layers, H = m.n_kv_head, G = m.group_size, C = m.n_clusters();
  ProfileJsonDoc doc;
  doc.kind = "cluster_map";
  doc.scorer = meta.scorer;
  doc.model = meta.model;
  doc.name = meta.name.empty() ? default_map_name(m) : meta.name;
  doc.meta = json{{"cluster_scope", m.global ? "global" : "per_layer"},
                  {"page_group_size", G},
                  {"num_layers", L},
                  {"num_kv_heads", H},
                  {"num_clusters", C},
                  {"base_ratio", m.base_ratio},
                  {"aggregate", "stored"},
                  {"tool", "tangram cluster"}};
  if (!m.layer_ids.empty()) doc.meta["static_layer_ids"] = m.layer_ids;
  if (!meta.source_profile.empty()) doc.meta["source_profile"] = meta.source_profile;
  if (!m.rank_score.empty()) {
    const double ideal = std::accumulate(m.rank_score.begin(), m.rank_score.end(), 0.0);
    TG_ASSIGN(const double waste, grouping_waste(std::span<const float>(m.rank_score), m));
    const double clustered = waste < 1.0 ? ideal / (1.0 - waste) : 0.0;
    doc.meta["over_allocation"] = {
        {"total_ideal", ideal}, {"total_clustered", clustered}, {"residual_waste_fraction", waste}};
  }
  if (meta.has_stability) {
    const ProfileStability& st = meta.stability;
    doc.meta["rank_stability"] = {{"global_spearman_mean", st.global_spearman_mean},
                                  {"global_spearman_min", st.global_spearman_min},
                                  {"per_layer_spearman_mean", st.per_layer_spearman_mean},
                                  {"per_layer_spearman_min", st.per_layer_spearman_min}};
  }
  std::vector<int32_t> members_flat;  // [C][G][2] = (layer, head)
  members_flat.reserve(static_cast<size_t>(C * G * 2));
  for (const auto& cluster : m.members())
    for (int i : cluster) {
      members_flat.push_back(i / m.n_kv_head);
      members_flat.push_back(i % m.n_kv_head);
    }
  std::vector<std::pair<std::string, JsonArray>> arrays;
  arrays.emplace_back("cluster_of", json_array_i32({L, H}, m.cluster_of));
  arrays.emplace_back("column_of", json_array_i32({L, H}, m.column_of));
  arrays.emplace_back("cluster_members", json_array_i32({C, G, 2}, members_flat));
  if (!m.rank_score.empty())
    arrays.emplace_back("rank_score", json_array_f32({L, H}, m.rank_score));
  arrays.emplace_back("page_group_size", json_array_i32({}, {m.group_size}));
  arrays.emplace_back("base_ratio", json_array_f32({}, {static_cast<float>(m.base_ratio)}));
  return write_profile_json(path, doc, arrays);
}

Result<HeadGroupMap> to_head_group_map(const ClusterMap& m, int n_layers_physical,
                                       std::span<const int64_t> layer_ids) {
  TG_TRY(validate_cluster_map(m));
  if (n_layers_physical < 1 || n_layers_physical > (1 << 20))
    return make_error("head groups: {} physical layers is not a valid layer count",
                      n_layers_physical);
  if (layer_ids.size() != static_cast<size_t>(m.n_layers))
    return make_error("head groups: {} layer ids for a map of {} profiled layers", layer_ids.size(),
                      m.n_layers);
  std::vector<int> profiled_at(static_cast<size_t>(n_layers_physical),
                               -1);  // physical → profiled layer
  for (size_t l = 0; l < layer_ids.size(); ++l) {
    const int64_t id = layer_ids[l];
    if (id < 0 || id >= n_layers_physical)
      return make_error("head groups: profiled layer {} maps to physical layer {}, outside [0, {})",
                        l, id, n_layers_physical);
    if (profiled_at[static_cast<size_t>(id)] >= 0)
      return make_error("head groups: physical layer {} is listed twice", id);
    profiled_at[static_cast<size_t>(id)] = static_cast<int>(l);
  }
  // Clusters in id order with their heads renamed to physical layers, then contiguous groups of G
  // for each unprofiled layer; ordered by the layer of each group's first column (stable), so a
  // per-layer map keeps its layer-major group order.
  struct Group {
    int layer;
    std::vector<int> heads;  // flat physical heads in column order
  };
  const int H = m.n_kv_head;
  std::vector<Group> groups;
  for (const auto& cluster : m.members()) {
    // A valid map has no empty cluster.
    Group g{static_cast<int>(layer_ids[static_cast<size_t>(cluster[0] / H)]), {}};
    for (const int i : cluster)
      g.heads.push_back(static_cast<int>(layer_ids[static_cast<size_t>(i / H)]) * H + i % H);
    groups.push_back(std::move(g));
  }
  for (int pl = 0; pl < n_layers_physical; ++pl) {
    if (profiled_at[static_cast<size_t>(pl)] >= 0) continue;
    for (int h = 0; h < H; h += m.group_size) {
      Group g{pl, {}};
      for (int c = h; c < std::min(H, h + m.group_size); ++c) g.heads.push_back(pl * H + c);
      groups.push_back(std::move(g));
    }
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const Group& x, const Group& y) { return x.layer < y.layer; });
  std::vector<std::vector<int>> flat;
  flat.reserve(groups.size());
  for (Group& g : groups) flat.push_back(std::move(g.heads));
  return HeadGroupMap::from_flat_groups(n_layers_physical, H, m.group_size, flat);
}

}  // namespace tangram
