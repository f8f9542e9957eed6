// Per-head KV retention profiles: how much of the evictable context each (layer, KV head) kept
// over a set of pilot samples at a base compression ratio (digest §5.1). Tangram fixes each
// head's budget ahead of time from these statistics (Budget Reservation, digest §3.4), and
// clusters heads of similar retention into shared pages (cluster.h).
//
// Files use the shared "tangram-profile-json/v1" format, kind "profile"
// (data/profiles/README.md); the arrays carry a leading ratio axis [R, ...] of which
// ratio index 0 is read, and save_profile writes R = 1 with the same names, so our own
// profiles and the shipped ones load through the same code.
//
// Context-only retention of one head in one sample (the profile's definition):
//   retention = clip(kept - sink - window, 0) / max(total - sink, 1), clipped to [0, 1].
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"

namespace tangram {

struct RetentionProfile {
  std::string scorer, model;
  std::string
      level;         // "cross-layer" | "per-layer": the threshold scope the profile was measured at
  int n_layers = 0;  // L: profiled layers (full-attention layers of a hybrid model)
  int n_kv_head = 0;               // H: KV heads per layer (per tensor-parallel rank)
  int n_samples = 0;               // S: pilot samples
  int n_physical_layers = 0;       // the model's layer count (meta.num_hidden_layers); 0 if unknown
  std::vector<int64_t> layer_ids;  // [L] physical layer of each profiled layer
  double base_ratio = 0;           // the compression ratio the profile was measured at
  int sink = 0, window = 0;        // of sample 0 (per-sample values are in sample_meta)
  std::vector<float> median, p90, std_dev, mean;  // [L][H] context-only retention over samples
  std::vector<double> raw_ratio;                  // [S][L][H] per-sample retention
  std::vector<int32_t> raw_kept;     // [S][L][H] kept tokens incl. sink and window; may be empty
  std::vector<int32_t> sample_meta;  // [S][4] = total - sink, sink, total, window

  size_t head_index(int l, int h) const {
    return static_cast<size_t>(l) * static_cast<size_t>(n_kv_head) + static_cast<size_t>(h);
  }
  size_t sample_index(int s, int l, int h) const {
    return static_cast<size_t>(s) * static_cast<size_t>(n_layers) * static_cast<size_t>(n_kv_head) +
           head_index(l, h);
  }
  int n_heads() const { return n_layers * n_kv_head; }
  // Median retention of (l, h): the score clustering ranks.
  float at(int l, int h) const { return median[head_index(l, h)]; }
  double raw_at(int s, int l, int h) const { return raw_ratio[sample_index(s, l, h)]; }
  int32_t kept_at(int s, int l, int h) const { return raw_kept[sample_index(s, l, h)]; }
  int32_t total_of(int s) const { return sample_meta[static_cast<size_t>(s) * 4 + 2]; }
  int32_t sink_of(int s) const { return sample_meta[static_cast<size_t>(s) * 4 + 1]; }
  int32_t window_of(int s) const { return sample_meta[static_cast<size_t>(s) * 4 + 3]; }
};

// Loads a profile file. The level comes from meta.level ("non_uniform" / "crosslayer_*" →
// cross-layer, "non_uniform_per_layer" / "perlayer_*" → per-layer), `mean` is computed from
// raw_ratio, sink and window from sample_meta. Every shape, dtype and value range is checked;
// a malformed file gives an Error naming the file and the array (never an abort).
Result<RetentionProfile> load_profile(const std::string& path);

// Writes the profile in the same schema (R = 1). Checks the shapes first.
Status save_profile(const RetentionProfile& p, const std::string& path);

// Checks the shapes and value ranges of a profile built in memory (load_profile's checks).
Status validate_profile(const RetentionProfile& p);

// Spearman rank correlation (ties get their average rank). nullopt when the lengths differ,
// there are fewer than 2 values, or either side is constant (the correlation is undefined).
std::optional<double> spearman(std::span<const double> a, std::span<const double> b);

// How stable a profile's per-head retentions are across samples.
struct ProfileStability {
  std::vector<float> spread_std;     // [L][H] std of retention over samples (= std_dev)
  std::vector<float> spread_p90;     // [L][H] p90 - median
  double mean_std = 0, max_std = 0;  // over heads
  double mean_p90_gap = 0, max_p90_gap = 0;
  double intrinsic_coverage = 0;  // fraction of heads with std < 0.05 (upstream's coverage)
  // Spearman of each sample's head ordering against the ordering of the per-head mean
  // retention. Global: one value per sample over all L·H heads; mean and min over samples.
  // Per layer: the layer's heads only; each layer's value is its mean over samples
  // (per_layer_spearman), and mean and min are over layers. As upstream (whose recorded
  // rank_stability this reproduces), an undefined correlation (a constant side, e.g. a layer
  // whose heads all keep nothing) counts as 0; the *_undefined counts say how often that happened.
  double global_spearman_mean = 0, global_spearman_min = 0;
  double per_layer_spearman_mean = 0, per_layer_spearman_min = 0;
  std::vector<double> per_layer_spearman;             // [L]
  int global_undefined = 0, per_layer_undefined = 0;  // (sample) and (sample, layer) pairs
};
ProfileStability profile_stability(const RetentionProfile& p);

// The profile of its first n layers (for a model shortened to n layers); unchanged when n is
// at least its layer count.
Result<RetentionProfile> profile_first_layers(RetentionProfile p, int n);

// Deterministic per-head budget fractions [L][H] (digest §3.4, the paper's Budget Reservation):
//   b_h = clip((mu_h + alpha·sigma_h) · ratio / base_ratio, 0, 1)
// with mu_h the mean and sigma_h the std of the head's context-only retention. At
// ratio == base_ratio this is exactly the paper's formula; other ratios rescale linearly (a
// stand-in until a profile exists at that ratio). A profile without a positive base ratio is
// taken at face value (no rescaling).
std::vector<float> budget_fractions(const RetentionProfile& p, double ratio, double alpha);

// The unclipped budget scores mu_h + alpha·sigma_h, [L][H] (negative or NaN → 0): the form both
// budget_fractions and the footprint scaling (budgets.h, scale_budgets_to_ratio) scale.
std::vector<float> budget_scores(const RetentionProfile& p, double alpha);

// Kept length of a head with budget fraction b for a context of `total` tokens, with the
// profile's retention definition: sink + window + ceil_block(b · max(total - sink, 0)), at most
// total. `block` > 1 rounds the evictable part up to whole blocks (the reference keeps
// block-aligned lengths); b is clipped to [0, 1].
int64_t budget_length(float b, int64_t total, int sink, int window, int block = 1);

}  // namespace tangram
