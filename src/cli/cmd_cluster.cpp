// `tangram cluster --kv-profile P --page-group-size G`: groups KV heads of similar retention into
// shared pages (sorted-chunk clustering), prints how much memory contiguous and clustered groupings
// over-allocate at several group sizes, the profile's stability, and writes the chosen map.
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <string>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/commands.h"
#include "cli/config_json.h"
#include "compress/cluster.h"
#include "compress/profile.h"

namespace tangram::cli {
namespace {

// Waste of one grouping as "median% tokens%", or n/a when the grouping does not exist.
std::string waste_cells(const RetentionProfile& p, const Result<ClusterMap>& m) {
  if (!m.ok()) return fmt::format("{:>8} {:>8}", "n/a", "n/a");
  const auto median = grouping_waste(std::span<const float>(p.median), *m);
  const auto tokens = sample_grouping_waste(
      p, *m, p.raw_kept.empty() ? WasteUnit::Retention : WasteUnit::KeptTokens);
  auto pct = [](const Result<double>& r) {
    return r.ok() ? fmt::format("{:.1f}%", 100.0 * *r) : std::string("n/a");
  };
  return fmt::format("{:>8} {:>8}", pct(median), pct(tokens));
}

void print_stability(const RetentionProfile& p) {
  const ProfileStability st = profile_stability(p);
  fmt::print("\nstability over {} samples:\n", p.n_samples);
  fmt::print(
      "  per-head spread   std: mean {:.4f}, max {:.4f}; p90 - median: mean {:.4f}, max {:.4f}\n",
      st.mean_std, st.max_std, st.mean_p90_gap, st.max_p90_gap);
  fmt::print("  stable heads      {:.1f}% have std < 0.05\n", 100.0 * st.intrinsic_coverage);
  fmt::print(
      "  Spearman vs mean ordering   global: mean {:.3f}, min {:.3f}   per layer: mean {:.3f}, min "
      "{:.3f}\n",
      st.global_spearman_mean, st.global_spearman_min, st.per_layer_spearman_mean,
      st.per_layer_spearman_min);
  if (st.global_undefined > 0 || st.per_layer_undefined > 0)
    fmt::print(
        "  ({} sample and {} (sample, layer) correlations were undefined, a constant side, and "
        "count as 0)\n",
        st.global_undefined, st.per_layer_undefined);
}

}  // namespace

int cmd_cluster(const ClusterOptions& opt) {
  auto loaded = load_profile(opt.profile);
  if (!loaded) {
    fmt::print(stderr, "error: {}\n", loaded.message());
    return 1;
  }
  const RetentionProfile& p = *loaded;
  const int L = p.n_layers, H = p.n_kv_head, G = opt.group_size;
  // Upstream pairs a cross-layer profile with global maps and a per-layer one with per-layer maps.
  const std::string scope =
      opt.scope.empty() ? (p.level == "per-layer" ? "per-layer" : "global") : opt.scope;
  if (scope != "per-layer" && scope != "global") {
    fmt::print(stderr, "error: --scope must be per-layer or global, not '{}'\n", scope);
    return 1;
  }
  const bool global = scope == "global";

  auto chosen = cluster_heads(p.median, L, H, G, global);
  if (!chosen) {
    fmt::print(stderr, "error: {}\n", chosen.message());
    return 1;
  }

  fmt::print("profile   {}\n", opt.profile);
  fmt::print(
      "          scorer {}, model {}, {} profile: {} layers x {} KV heads, {} samples, base ratio "
      "{:g}, "
      "sink {}, window {}\n",
      p.scorer.empty() ? "?" : p.scorer, p.model.empty() ? "?" : p.model, p.level, L, H,
      p.n_samples, p.base_ratio, p.sink, p.window);
  fmt::print(
      "\nover-allocation = (allocated - ideal) / allocated, a group allocating G x its largest "
      "member\n"
      "  (the share of kept tokens over-retained beyond the heads' own budgets):\n"
      "  median: on each head's median retention; tokens: mean over samples of the same on the\n"
      "  sample's {} (grouping fixed from the median). Contiguous = runs of G heads in (layer, "
      "head)\n"
      "  order (spanning layers when G > H); clustered = sorted-chunk, per layer and global (the "
      "map\n"
      "  written has {} scope).\n\n",
      p.raw_kept.empty() ? "retention" : "kept tokens", scope);
  fmt::print("  {:<30} {:>17}   {:>17}   {:>17}\n", "G", "contiguous", "per layer", "global");
  fmt::print("  {:<30} {:>8} {:>8}   {:>8} {:>8}   {:>8} {:>8}\n", "", "median", "tokens", "median",
             "tokens", "median", "tokens");

  std::set<int> sizes{1, 2, 4, 8, 16, G, H};
  for (int g : sizes) {
    std::string label = std::to_string(g);
    if (g == H) label += " (unified: a layer's heads)";
    if (g == G) label += " *";
    fmt::print("  {:<30} {}   {}   {}\n", label, waste_cells(p, contiguous_map(L, H, g)),
               waste_cells(p, cluster_heads(p.median, L, H, g, false)),
               waste_cells(p, cluster_heads(p.median, L, H, g, true)));
  }
  fmt::print("  {:<30} {}\n", fmt::format("{} (one length, all heads)", L * H),
             waste_cells(p, contiguous_map(L, H, L * H)));
  fmt::print("  (* the chosen group size; n/a: G does not divide the heads for this scope)\n");

  ClusterMap& map = *chosen;
  map.layer_ids = p.layer_ids;
  map.base_ratio = p.base_ratio;
  if (!opt.out.empty()) {
    ClusterMapMeta meta;
    meta.scorer = p.scorer;
    meta.model = p.model;
    meta.source_profile = opt.profile;
    meta.has_stability = true;
    meta.stability = profile_stability(p);
    if (Status st = save_cluster_map(map, opt.out, meta); !st.ok()) {
      fmt::print(stderr, "error: {}\n", st.message());
      return 1;
    }
    fmt::print("\nwrote {} map: {} clusters of {} heads -> {}\n", scope, map.n_clusters(), G,
               opt.out);
  }
  print_stability(p);
  return 0;
}

Command register_cluster(CLI::App& app) {
  auto opt = std::make_shared<ClusterOptions>();
  ClusterOptions& cl = *opt;
  auto* c_cl = app.add_subcommand(
      "cluster",
      "Group KV heads of similar retention (from a profile) into shared pages; print the waste");
  c_cl->add_option("--kv-profile", cl.profile, "Retention profile JSON (tangram-profile-json/v1)")
      ->required()
      ->check(CLI::ExistingFile);
  c_cl->add_option("--page-group-size", cl.group_size, "KV heads per group (G)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  c_cl->add_option("--scope", cl.scope,
                   "per-layer or global (default: global for a cross-layer profile)")
      ->check(CLI::IsMember({"per-layer", "global"}));
  c_cl->add_option("-o,--out", cl.out, "Write the chosen cluster map (JSON) here");
  return {c_cl, [opt] { return cmd_cluster(*opt); }, [opt] { return plan_json(*opt); }};
}

}  // namespace tangram::cli
