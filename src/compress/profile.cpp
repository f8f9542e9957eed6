#include "compress/profile.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "compress/profile_json.h"

namespace tangram {
namespace {

using json = nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Upstream's "model intrinsic coverage": heads whose retention std is below this are stable.
constexpr float kStableStd = 0.05f;

// meta.level names (old and current) → our two scopes.
Result<std::string> level_from_meta(const json& meta, const std::string& path) {
  const auto it = meta.find("level");
  if (it == meta.end() || !it->is_string())
    return make_error(
        "{}: meta.level is missing (it says whether the profile is cross-layer or per-layer)",
        path);
  const std::string l = it->get<std::string>();
  if (l == "non_uniform" || l == "crosslayer_head" || l == "crosslayer_cluster" ||
      l == "cross-layer")
    return std::string("cross-layer");
  if (l == "non_uniform_per_layer" || l == "perlayer_head" || l == "perlayer_cluster" ||
      l == "per-layer")
    return std::string("per-layer");
  return make_error(
      "{}: meta.level '{}' is not a known profiling level (non_uniform, crosslayer_head, "
      "non_uniform_per_layer, perlayer_head)",
      path, l);
}

template <typename T>
std::vector<T> slice_as(const JsonArray& a, size_t offset, size_t count) {
  std::vector<T> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = static_cast<T>(a.data[offset + i]);
  return out;
}

bool all_in_unit_range(std::span<const float> v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return x >= 0.0f && x <= 1.0f; });
}

// Ranks 1..n with ties sharing their average rank.
std::vector<double> average_ranks(std::span<const double> v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> rank(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i + 1;
    while (j < order.size() && v[order[j]] == v[order[i]]) ++j;
    const double r = 0.5 * static_cast<double>(i + 1 + j);  // mean of ranks i+1 .. j
    for (size_t k = i; k < j; ++k) rank[order[k]] = r;
    i = j;
  }
  return rank;
}

// Spearman with upstream's convention for the undefined case: 0.
double spearman_or_zero(std::span<const double> a, std::span<const double> b, int& undefined) {
  const std::optional<double> r = spearman(a, b);
  if (!r) ++undefined;
  return r.value_or(0.0);
}

}  // namespace

Status validate_profile(const RetentionProfile& p) {
  if (p.n_layers < 1 || p.n_kv_head < 1 || p.n_samples < 1)
    return make_error("profile: layers ({}), KV heads ({}) and samples ({}) must be positive",
                      p.n_layers, p.n_kv_head, p.n_samples);
  if (p.level != "cross-layer" && p.level != "per-layer")
    return make_error("profile: level '{}' is neither 'cross-layer' nor 'per-layer'", p.level);
  const size_t heads = static_cast<size_t>(p.n_layers) * static_cast<size_t>(p.n_kv_head);
  const size_t raw = heads * static_cast<size_t>(p.n_samples);
  auto check_size = [](const char* name, size_t got, size_t want) -> Status {
    if (got != want) return make_error("profile: {} has {} values, expected {}", name, got, want);
    return Status::Ok();
  };
  TG_TRY(check_size("layer_ids", p.layer_ids.size(), static_cast<size_t>(p.n_layers)));
  TG_TRY(check_size("median", p.median.size(), heads));
  TG_TRY(check_size("p90", p.p90.size(), heads));
  TG_TRY(check_size("std_dev", p.std_dev.size(), heads));
  if (!p.mean.empty()) TG_TRY(check_size("mean", p.mean.size(), heads));
  TG_TRY(check_size("raw_ratio", p.raw_ratio.size(), raw));
  if (!p.raw_kept.empty()) TG_TRY(check_size("raw_kept", p.raw_kept.size(), raw));
  TG_TRY(check_size("sample_meta", p.sample_meta.size(), static_cast<size_t>(p.n_samples) * 4));
  if (!(p.base_ratio > 0.0 && p.base_ratio <= 1.0))
    return make_error("profile: base ratio {} is outside (0, 1]", p.base_ratio);
  if (!all_in_unit_range(p.median) || !all_in_unit_range(p.p90) || !all_in_unit_range(p.std_dev) ||
      !all_in_unit_range(p.mean))
    return make_error("profile: a per-head statistic is outside [0, 1] (or NaN)");
  if (!std::all_of(p.raw_ratio.begin(), p.raw_ratio.end(),
                   [](double x) { return x >= 0.0 && x <= 1.0; }))
    return make_error("profile: a raw_ratio value is outside [0, 1] (or NaN)");
  if (!std::all_of(p.raw_kept.begin(), p.raw_kept.end(), [](int32_t x) { return x >= 0; }))
    return make_error("profile: a raw_kept value is negative");
  std::set<int64_t> seen;
  for (int64_t id : p.layer_ids) {
    if (id < 0 || (p.n_physical_layers > 0 && id >= p.n_physical_layers))
      return make_error("profile: layer id {} is outside [0, {})", id, p.n_physical_layers);
    if (!seen.insert(id).second) return make_error("profile: layer id {} appears twice", id);
  }
  for (int s = 0; s < p.n_samples; ++s) {
    const int32_t* m = p.sample_meta.data() + static_cast<size_t>(s) * 4;
    if (m[1] < 0 || m[3] < 0 || m[2] < m[1] || m[0] != m[2] - m[1])
      return make_error(
          "profile: sample {} has inconsistent sample_meta [{}, {}, {}, {}] (want [total - sink, "
          "sink, total, window] with 0 <= sink <= total, window >= 0)",
          s, m[0], m[1], m[2], m[3]);
  }
  return Status::Ok();
}

Result<RetentionProfile> load_profile(const std::string& path) {
  TG_ASSIGN(const ProfileJsonDoc doc, read_profile_json(path, "profile"));
  TG_ASSIGN(const JsonArray* median, doc.array("ratio_per_head", "float32", {-1, -1, -1}));
  const int64_t R = median->shape[0], L = median->shape[1], H = median->shape[2];
  if (R < 1 || L < 1 || H < 1)
    return make_error("{}: ratio_per_head has shape {}; every extent must be positive", path,
                      shape_string(median->shape));
  TG_ASSIGN(const JsonArray* p90, doc.array("ratio_p90_per_head", "float32", {R, L, H}));
  TG_ASSIGN(const JsonArray* sd, doc.array("ratio_std_per_head", "float32", {R, L, H}));
  TG_ASSIGN(const JsonArray* ratios, doc.array("base_ratios", "float32", {R}));
  TG_ASSIGN(const JsonArray* ids, doc.array("static_layer_ids", "int64", {L}));
  TG_ASSIGN(const JsonArray* raw, doc.array("raw_ratio", "float64", {R, -1, L, H}));
  const int64_t S = raw->shape[1];
  if (S < 1) return make_error("{}: raw_ratio holds no samples", path);
  TG_ASSIGN(const JsonArray* smeta, doc.array("sample_meta", "int32", {S, 4}));
  const JsonArray* kept = nullptr;
  if (doc.arrays.count("raw_kept")) {
    TG_ASSIGN(kept, doc.array("raw_kept", "int32", {R, S, L, H}));
  }

  RetentionProfile p;
  p.scorer = doc.scorer;
  p.model = doc.model;
  TG_ASSIGN(p.level, level_from_meta(doc.meta, path));
  p.n_layers = static_cast<int>(L);
  p.n_kv_head = static_cast<int>(H);
  p.n_samples = static_cast<int>(S);
  if (const auto it = doc.meta.find("num_hidden_layers");
      it != doc.meta.end() && it->is_number_integer())
    p.n_physical_layers = static_cast<int>(std::clamp<int64_t>(it->get<int64_t>(), 0, 1 << 20));
  const size_t heads = static_cast<size_t>(L * H);
  const size_t raw_count = static_cast<size_t>(S) * heads;
  p.layer_ids = slice_as<int64_t>(*ids, 0, static_cast<size_t>(L));
  p.base_ratio = ratios->data[0];
  p.median = slice_as<float>(*median, 0, heads);  // ratio index 0 of [R][L][H]
  p.p90 = slice_as<float>(*p90, 0, heads);
  p.std_dev = slice_as<float>(*sd, 0, heads);
  p.raw_ratio = slice_as<double>(*raw, 0, raw_count);  // ratio index 0 of [R][S][L][H]
  if (kept) p.raw_kept = slice_as<int32_t>(*kept, 0, raw_count);
  p.sample_meta = slice_as<int32_t>(*smeta, 0, static_cast<size_t>(S) * 4);
  p.sink = p.sample_meta[1];
  p.window = p.sample_meta[3];
  if (Status st = validate_profile(p); !st.ok()) return make_error("{}: {}", path, st.message());

  p.mean.assign(heads, 0.0f);
  for (size_t i = 0; i < heads; ++i) {
    double sum = 0;
    for (size_t s = 0; s < static_cast<size_t>(S); ++s) sum += p.raw_ratio[s * heads + i];
    p.mean[i] = static_cast<float>(sum / static_cast<double>(S));
  }
  return p;
}

Status save_profile(const RetentionProfile& p, const std::string& path) {
  TG_TRY(validate_profile(p));
  const int64_t L = p.n_layers, H = p.n_kv_head, S = p.n_samples;
  ProfileJsonDoc doc;
  doc.kind = "profile";
  doc.scorer = p.scorer;
  doc.model = p.model;
  doc.name = p.level == "per-layer" ? "profile_perlayer" : "profile";
  doc.meta = json{{"level", p.level == "per-layer" ? "perlayer_head" : "crosslayer_head"},
                  {"scorer", p.scorer},
                  {"num_static_layers", L},
                  {"static_layer_ids", p.layer_ids},
                  {"num_kv_heads", H},
                  {"sample_count", S},
                  {"base_ratios", json::array({p.base_ratio})},
                  {"window_size", p.window},
                  {"tool", "tangram"}};
  if (p.n_physical_layers > 0) doc.meta["num_hidden_layers"] = p.n_physical_layers;
  std::vector<std::pair<std::string, JsonArray>> arrays;
  arrays.emplace_back("ratio_per_head", json_array_f32({1, L, H}, p.median));
  arrays.emplace_back("ratio_p90_per_head", json_array_f32({1, L, H}, p.p90));
  arrays.emplace_back("ratio_std_per_head", json_array_f32({1, L, H}, p.std_dev));
  arrays.emplace_back("base_ratios", json_array_f32({1}, {static_cast<float>(p.base_ratio)}));
  arrays.emplace_back("static_layer_ids", json_array_i64({L}, p.layer_ids));
  if (!p.raw_kept.empty())
    arrays.emplace_back("raw_kept", json_array_i32({1, S, L, H}, p.raw_kept));
  arrays.emplace_back("raw_ratio", json_array_f64({1, S, L, H}, p.raw_ratio));
  arrays.emplace_back("sample_meta", json_array_i32({S, 4}, p.sample_meta));
  return write_profile_json(path, doc, arrays);
}

std::optional<double> spearman(std::span<const double> a, std::span<const double> b) {
  if (a.size() != b.size() || a.size() < 2) return std::nullopt;
  if (std::any_of(a.begin(), a.end(), [](double x) { return std::isnan(x); }) ||
      std::any_of(b.begin(), b.end(), [](double x) { return std::isnan(x); }))
    return std::nullopt;
  const std::vector<double> ra = average_ranks(a), rb = average_ranks(b);
  // Pearson correlation of the ranks (exact with ties, unlike the 1 - 6Σd²/… shortcut).
  const double n = static_cast<double>(a.size());
  const double mean = (n + 1.0) / 2.0;  // both rank vectors average (n + 1) / 2
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    const double da = ra[i] - mean, db = rb[i] - mean;
    sab += da * db;
    saa += da * da;
    sbb += db * db;
  }
  if (saa <= 0 || sbb <= 0) return std::nullopt;
  return sab / std::sqrt(saa * sbb);
}

ProfileStability profile_stability(const RetentionProfile& p) {
  ProfileStability st;
  if (!validate_profile(p).ok()) {
    st.mean_std = st.max_std = st.mean_p90_gap = st.max_p90_gap = st.intrinsic_coverage = kNaN;
    st.global_spearman_mean = st.global_spearman_min = kNaN;
    st.per_layer_spearman_mean = st.per_layer_spearman_min = kNaN;
    return st;
  }
  const size_t heads = static_cast<size_t>(p.n_heads());
  st.spread_std = p.std_dev;
  st.spread_p90.resize(heads);
  int stable = 0;
  for (size_t i = 0; i < heads; ++i) {
    st.spread_p90[i] = p.p90[i] - p.median[i];
    st.mean_std += static_cast<double>(p.std_dev[i]);
    st.max_std = std::max(st.max_std, static_cast<double>(p.std_dev[i]));
    st.mean_p90_gap += static_cast<double>(st.spread_p90[i]);
    st.max_p90_gap = std::max(st.max_p90_gap, static_cast<double>(st.spread_p90[i]));
    stable += p.std_dev[i] < kStableStd ? 1 : 0;
  }
  st.mean_std /= static_cast<double>(heads);
  st.mean_p90_gap /= static_cast<double>(heads);
  st.intrinsic_coverage = static_cast<double>(stable) / static_cast<double>(heads);

  // The reference ordering: per-head mean retention over samples, in double.
  std::vector<double> mean(heads, 0.0);  // [L][H]
  for (int s = 0; s < p.n_samples; ++s)
    for (size_t i = 0; i < heads; ++i) mean[i] += p.raw_ratio[static_cast<size_t>(s) * heads + i];
  for (double& m : mean) m /= p.n_samples;

  const size_t H = static_cast<size_t>(p.n_kv_head);
  const double n_samples = p.n_samples;
  st.global_spearman_min = std::numeric_limits<double>::infinity();
  st.per_layer_spearman.assign(static_cast<size_t>(p.n_layers), 0.0);
  for (int s = 0; s < p.n_samples; ++s) {
    const std::span<const double> sample(p.raw_ratio.data() + static_cast<size_t>(s) * heads,
                                         heads);
    const double r = spearman_or_zero(sample, mean, st.global_undefined);
    st.global_spearman_mean += r / n_samples;
    st.global_spearman_min = std::min(st.global_spearman_min, r);
    for (size_t l = 0; l < static_cast<size_t>(p.n_layers); ++l)
      st.per_layer_spearman[l] += spearman_or_zero(sample.subspan(l * H, H),
                                                   std::span<const double>(mean).subspan(l * H, H),
                                                   st.per_layer_undefined) /
                                  n_samples;
  }
  st.per_layer_spearman_mean =
      std::accumulate(st.per_layer_spearman.begin(), st.per_layer_spearman.end(), 0.0) /
      static_cast<double>(p.n_layers);
  st.per_layer_spearman_min =
      *std::min_element(st.per_layer_spearman.begin(), st.per_layer_spearman.end());
  return st;
}

Result<RetentionProfile> profile_first_layers(RetentionProfile p, int n) {
  if (n < 1) return make_error("a profile needs at least one layer");
  if (n >= p.n_layers) return p;
  const auto per = static_cast<size_t>(n) * static_cast<size_t>(p.n_kv_head);
  const auto full = static_cast<size_t>(p.n_layers) * static_cast<size_t>(p.n_kv_head);
  for (auto* v : {&p.median, &p.p90, &p.std_dev, &p.mean})
    if (v->size() >= per) v->resize(per);
  auto cut = [&](auto& v) {
    if (v.size() < static_cast<size_t>(p.n_samples) * full) return;
    std::remove_reference_t<decltype(v)> w;
    for (int s = 0; s < p.n_samples; ++s)
      w.insert(w.end(), v.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(s) * full),
               v.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(s) * full + per));
    v = std::move(w);
  };
  cut(p.raw_ratio);
  cut(p.raw_kept);
  p.layer_ids.resize(static_cast<size_t>(n));
  p.n_layers = n;
  p.n_physical_layers = n;
  TG_TRY(validate_profile(p));
  return p;
}

namespace {

// mu + alpha·sigma of head i, in double; 0 when negative or NaN.
double budget_score(const RetentionProfile& p, size_t i, double alpha) {
  const size_t heads = p.median.size();
  const double mu = static_cast<double>(p.mean.size() == heads ? p.mean[i] : p.median[i]);
  const double sigma = p.std_dev.size() == heads ? static_cast<double>(p.std_dev[i]) : 0.0;
  const double x = mu + alpha * sigma;
  return x >= 0.0 ? x : 0.0;  // NaN → 0
}

}  // namespace

std::vector<float> budget_scores(const RetentionProfile& p, double alpha) {
  std::vector<float> score(p.median.size());  // [L][H]
  for (size_t i = 0; i < score.size(); ++i)
    score[i] = static_cast<float>(budget_score(p, i, alpha));
  return score;
}

std::vector<float> budget_fractions(const RetentionProfile& p, double ratio, double alpha) {
  const double scale = p.base_ratio > 0.0 ? std::max(ratio, 0.0) / p.base_ratio : 1.0;
  std::vector<float> b(p.median.size());  // [L][H]
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = static_cast<float>(std::min(budget_score(p, i, alpha) * scale, 1.0));
  return b;
}

int64_t budget_length(float b, int64_t total, int sink, int window, int block) {
  if (total <= 0) return 0;
  const double frac = b >= 0.0f ? std::min(static_cast<double>(b), 1.0) : 0.0;  // NaN → 0
  const double s = std::max(sink, 0), w = std::max(window, 0);
  const double evictable = std::max(static_cast<double>(total) - s, 0.0);
  double ctx = std::ceil(frac * evictable);
  if (block > 1) ctx = std::ceil(ctx / block) * block;
  const double len = s + w + ctx;
  return len >= static_cast<double>(total) ? total : static_cast<int64_t>(len);
}

}  // namespace tangram
