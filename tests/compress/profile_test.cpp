// Retention profiles: every shipped profile loads and is self-consistent, save/load round trips,
// malformed files give errors, Spearman and the deterministic budgets follow their formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "compress/profile.h"
#include "compress/shipped_profiles.h"
#include "support/test_support.h"

namespace tangram {
namespace {

using nlohmann::json;

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// A small hand-made profile: L = 2, H = 2, S = 3, sink 4, window 8, total 204. Values are
// dyadic so sums and means are exact (ties stay ties).
RetentionProfile tiny_profile() {
  RetentionProfile p;
  p.scorer = "snapkv";
  p.model = "tiny";
  p.level = "per-layer";
  p.n_layers = 2;
  p.n_kv_head = 2;
  p.n_samples = 3;
  p.n_physical_layers = 4;
  p.layer_ids = {1, 3};
  p.base_ratio = 0.5;
  p.sink = 4;
  p.window = 8;
  p.raw_ratio = {0.25, 0.5, 0.25, 0.375,   // sample 0 [L][H]
                 0.5,  0.5, 0.5,  0.375,   // sample 1
                 0.75, 0.5, 0.0,  0.375};  // sample 2
  p.median = {0.5f, 0.5f, 0.25f, 0.375f};
  p.mean = {0.5f, 0.5f, 0.25f, 0.375f};
  p.std_dev = {0.204124f, 0.0f, 0.204124f, 0.0f};
  p.p90 = {0.7f, 0.5f, 0.45f, 0.375f};
  // kept = sink + window + ratio · (total - sink) = 12 + 200 · ratio
  p.raw_kept = {62, 112, 62, 87, 112, 112, 112, 87, 162, 112, 12, 87};
  p.sample_meta = {200, 4, 204, 8, 200, 4, 204, 8, 200, 4, 204, 8};
  return p;
}

TEST(Profile, EveryShippedProfileLoadsAndIsSelfConsistent) {
  int n_profiles = 0;
  for (const auto& f : testing::shipped_profile_files()) {
    if (f.kind != "profile") continue;
    ++n_profiles;
    SCOPED_TRACE(f.path);
    auto r = load_profile(f.path);
    ASSERT_TRUE(r.ok()) << r.message();
    const RetentionProfile& p = *r;
    const auto& shape = f.entry["arrays"]["raw_ratio"];  // [R, S, L, H]
    EXPECT_EQ(p.n_samples, shape[1].get<int>());
    EXPECT_EQ(p.n_layers, shape[2].get<int>());
    EXPECT_EQ(p.n_kv_head, shape[3].get<int>());
    EXPECT_EQ(p.scorer, f.scorer);
    EXPECT_EQ(p.model, f.model);
    EXPECT_EQ(p.level, f.entry["threshold_scope"] == "per_layer" ? "per-layer" : "cross-layer");
    EXPECT_EQ(p.layer_ids, f.entry["static_layer_ids"].get<std::vector<int64_t>>());
    EXPECT_EQ(p.n_physical_layers, f.entry["num_hidden_layers"].get<int>());
    EXPECT_NEAR(p.base_ratio, 0.3, 1e-7);
    EXPECT_EQ(p.sink, 32);
    EXPECT_EQ(p.window, 4096);
    ASSERT_EQ(p.raw_kept.size(), p.raw_ratio.size());

    const size_t heads = static_cast<size_t>(p.n_heads());
    for (int s = 0; s < p.n_samples; ++s) {
      EXPECT_EQ(p.sink_of(s), 32);
      EXPECT_EQ(p.window_of(s), 4096);
      // The README's definition reproduces raw_ratio from raw_kept and sample_meta: within the
      // 6-digit rounding, plus half a token where TP ranks were averaged (qwen3-30b-a3b).
      for (int l = 0; l < p.n_layers; ++l)
        for (int h = 0; h < p.n_kv_head; ++h) {
          const double ctx = std::max(p.kept_at(s, l, h) - p.sink_of(s) - p.window_of(s), 0);
          const double want = std::clamp(ctx / std::max(p.total_of(s) - p.sink_of(s), 1), 0.0, 1.0);
          const double tol = 5e-6 * std::max(want, 1e-3) + 0.5 / (p.total_of(s) - p.sink_of(s));
          ASSERT_NEAR(p.raw_at(s, l, h), want, tol) << s << " " << l << " " << h;
        }
    }
    // mean / median / population std over samples agree with the raw values.
    for (size_t i = 0; i < heads; ++i) {
      std::vector<double> v;
      for (int s = 0; s < p.n_samples; ++s)
        v.push_back(p.raw_ratio[static_cast<size_t>(s) * heads + i]);
      std::sort(v.begin(), v.end());
      const size_t n = v.size();
      const double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
      double mean = 0, var = 0;
      for (double x : v) mean += x;
      mean /= static_cast<double>(n);
      for (double x : v) var += (x - mean) * (x - mean);
      const double sd = std::sqrt(var / static_cast<double>(n));
      EXPECT_NEAR(static_cast<double>(p.median[i]), median, 2e-6) << i;
      EXPECT_NEAR(static_cast<double>(p.mean[i]), mean, 1e-6) << i;
      EXPECT_NEAR(static_cast<double>(p.std_dev[i]), sd, 1e-5) << i;
      EXPECT_GE(p.p90[i], p.median[i]) << i;
    }
  }
  EXPECT_EQ(n_profiles, 34);
}

TEST(Profile, ShippedProfileRoundTripsExactly) {
  auto a = load_profile(testing::profile_path("snapkv", "gemma-3-12b-it", true));
  ASSERT_TRUE(a.ok()) << a.message();
  const std::string path = (testing::temp_dir() / "p.json").string();
  ASSERT_TRUE(save_profile(*a, path).ok());
  auto b = load_profile(path);
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ(b->scorer, a->scorer);
  EXPECT_EQ(b->model, a->model);
  EXPECT_EQ(b->level, a->level);
  EXPECT_EQ(b->n_layers, a->n_layers);
  EXPECT_EQ(b->n_kv_head, a->n_kv_head);
  EXPECT_EQ(b->n_samples, a->n_samples);
  EXPECT_EQ(b->n_physical_layers, 48);
  EXPECT_EQ(b->layer_ids, a->layer_ids);
  EXPECT_EQ(b->base_ratio, a->base_ratio);
  EXPECT_EQ(b->sink, a->sink);
  EXPECT_EQ(b->window, a->window);
  EXPECT_EQ(b->median, a->median);
  EXPECT_EQ(b->p90, a->p90);
  EXPECT_EQ(b->std_dev, a->std_dev);
  EXPECT_EQ(b->mean, a->mean);
  EXPECT_EQ(b->raw_ratio, a->raw_ratio);
  EXPECT_EQ(b->raw_kept, a->raw_kept);
  EXPECT_EQ(b->sample_meta, a->sample_meta);
}

TEST(Profile, HandMadeProfileRoundTripsWithAndWithoutKept) {
  for (bool with_kept : {true, false}) {
    RetentionProfile p = tiny_profile();
    if (!with_kept) p.raw_kept.clear();
    const std::string path = (testing::temp_dir() / "tiny.json").string();
    ASSERT_TRUE(save_profile(p, path).ok());
    auto r = load_profile(path);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(r->level, "per-layer");
    EXPECT_EQ(r->layer_ids, p.layer_ids);
    EXPECT_EQ(r->median, p.median);
    EXPECT_EQ(r->std_dev, p.std_dev);
    EXPECT_EQ(r->raw_ratio, p.raw_ratio);
    EXPECT_EQ(r->raw_kept, p.raw_kept);
    EXPECT_EQ(r->sink, 4);
    EXPECT_EQ(r->window, 8);
    for (size_t i = 0; i < p.mean.size(); ++i) EXPECT_NEAR(r->mean[i], p.mean[i], 1e-7f);
  }
  RetentionProfile bad = tiny_profile();
  bad.median.pop_back();
  EXPECT_FALSE(save_profile(bad, (testing::temp_dir() / "bad.json").string()).ok());
}

// Loads a shipped profile's JSON, lets `edit` damage it, writes it and returns the load error.
std::string load_error_after(const std::function<void(json&)>& edit) {
  const auto src = testing::profile_path("snapkv", "gpt-oss-20b", false);
  json j = json::parse(testing::read_file(src));
  edit(j);
  const std::string path = (testing::temp_dir() / "broken.json").string();
  write_text(path, j.dump());
  auto r = load_profile(path);
  EXPECT_FALSE(r.ok()) << "a damaged profile loaded";
  return r.ok() ? std::string() : r.message();
}

TEST(Profile, MalformedFilesGiveErrorsNotCrashes) {
  const auto dir = testing::temp_dir();
  // Missing file, not JSON, truncated JSON.
  auto r = load_profile((dir / "nope.json").string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("cannot read the profile"), std::string::npos) << r.message();
  const std::string text =
      testing::read_file(testing::profile_path("snapkv", "gpt-oss-20b", false));
  for (size_t cut : {size_t{0}, size_t{1}, text.size() / 3, text.size() / 2, text.size() - 2}) {
    write_text((dir / "cut.json").string(), text.substr(0, cut));
    r = load_profile((dir / "cut.json").string());
    ASSERT_FALSE(r.ok()) << cut;
    EXPECT_NE(r.message().find("cut.json"), std::string::npos) << r.message();
  }
  write_text((dir / "list.json").string(), "[1, 2, 3]");
  EXPECT_FALSE(load_profile((dir / "list.json").string()).ok());

  auto msg = load_error_after([](json& j) { j["format"] = "other"; });
  EXPECT_NE(msg.find("format"), std::string::npos) << msg;
  msg = load_error_after([](json& j) { j["kind"] = "cluster_map"; });
  EXPECT_NE(msg.find("kind"), std::string::npos) << msg;
  // Wrong shape: the message names the array and both shapes.
  msg = load_error_after([](json& j) {
    auto& a = j["arrays"]["ratio_p90_per_head"];
    a["shape"] = {1, 8, 12};
  });
  EXPECT_NE(msg.find("ratio_p90_per_head"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[1, 8, 12]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected [1, 12, 8]"), std::string::npos) << msg;
  // Shape that does not match the data length.
  msg = load_error_after([](json& j) { j["arrays"]["raw_ratio"]["shape"] = {1, 27, 12, 8}; });
  EXPECT_NE(msg.find("raw_ratio"), std::string::npos) << msg;
  // Wrong dtype, unknown dtype, non-number data, fractional integer, out-of-range integer.
  msg = load_error_after([](json& j) { j["arrays"]["raw_ratio"]["dtype"] = "float32"; });
  EXPECT_NE(msg.find("dtype float32, expected float64"), std::string::npos) << msg;
  msg = load_error_after([](json& j) { j["arrays"]["ratio_per_head"]["dtype"] = "float16"; });
  EXPECT_NE(msg.find("float16"), std::string::npos) << msg;
  msg = load_error_after([](json& j) { j["arrays"]["ratio_per_head"]["data"][3] = "x"; });
  EXPECT_NE(msg.find("element 3"), std::string::npos) << msg;
  msg = load_error_after([](json& j) { j["arrays"]["raw_kept"]["data"][0] = 1.5; });
  EXPECT_NE(msg.find("raw_kept"), std::string::npos) << msg;
  msg = load_error_after([](json& j) { j["arrays"]["sample_meta"]["data"][0] = 4294967296LL; });
  EXPECT_NE(msg.find("sample_meta"), std::string::npos) << msg;
  msg = load_error_after([](json& j) { j["arrays"]["ratio_per_head"]["data"][0] = nullptr; });
  EXPECT_NE(msg.find("[0, 1]"), std::string::npos) << msg;
  // Missing array, bad structure, bad values.
  msg = load_error_after([](json& j) { j["arrays"].erase("sample_meta"); });
  EXPECT_NE(msg.find("missing array 'sample_meta'"), std::string::npos) << msg;
  msg = load_error_after([](json& j) { j["arrays"]["base_ratios"] = 3; });
  EXPECT_NE(msg.find("base_ratios"), std::string::npos) << msg;
  msg = load_error_after([](json& j) { j["arrays"]["base_ratios"]["shape"] = {-1}; });
  EXPECT_NE(msg.find("base_ratios"), std::string::npos) << msg;
  msg = load_error_after([](json& j) { j["meta"]["level"] = "uniform"; });
  EXPECT_NE(msg.find("uniform"), std::string::npos) << msg;
  msg = load_error_after([](json& j) { j["meta"].erase("level"); });
  EXPECT_NE(msg.find("meta.level"), std::string::npos) << msg;
  msg = load_error_after([](json& j) { j["arrays"]["raw_ratio"]["data"][5] = 1.5; });
  EXPECT_NE(msg.find("raw_ratio"), std::string::npos) << msg;
  msg = load_error_after([](json& j) { j["arrays"]["sample_meta"]["data"][0] = 7; });
  EXPECT_NE(msg.find("sample_meta"), std::string::npos) << msg;
  msg = load_error_after([](json& j) { j["arrays"]["static_layer_ids"]["data"][1] = 1; });
  EXPECT_NE(msg.find("twice"), std::string::npos) << msg;
  msg = load_error_after([](json& j) {
    for (const char* a : {"ratio_per_head", "ratio_p90_per_head", "ratio_std_per_head"}) {
      j["arrays"][a]["shape"] = {1, 0, 8};
      j["arrays"][a]["data"] = json::array();
    }
  });
  EXPECT_NE(msg.find("positive"), std::string::npos) << msg;
}

TEST(Spearman, KnownVectors) {
  const std::vector<double> a{1, 2, 3, 4, 5};
  EXPECT_NEAR(*spearman(a, a), 1.0, 1e-12);
  EXPECT_NEAR(*spearman(a, std::vector<double>{50, 40, 30, 20, 10}), -1.0, 1e-12);
  // Monotone transforms do not change it.
  EXPECT_NEAR(*spearman(a, std::vector<double>{0.1, 4, 9, 100, 1e6}), 1.0, 1e-12);
  // Ties take their average rank: ranks (1, 2, 3.5, 5, 3.5) → 8 / sqrt(10 · 9.5) (scipy:
  // 0.8207826816681233).
  EXPECT_NEAR(*spearman(a, std::vector<double>{5, 6, 7, 8, 7}), 0.8207826816681233, 1e-12);
  // No ties: 1 - 6 Σd² / (n (n² - 1)) with d = (0, 0, 1, -1, 0) → 0.9.
  EXPECT_NEAR(*spearman(a, std::vector<double>{1, 2, 4, 3, 5}), 0.9, 1e-12);
  EXPECT_FALSE(spearman(a, std::vector<double>{1, 1, 1, 1, 1}).has_value());
  EXPECT_FALSE(spearman(a, std::vector<double>{1, 2}).has_value());
  EXPECT_FALSE(spearman(std::vector<double>{1}, std::vector<double>{1}).has_value());
  EXPECT_FALSE(spearman(a, std::vector<double>{1, 2, NAN, 4, 5}).has_value());
}

TEST(Profile, StabilityOfHandMadeProfile) {
  const RetentionProfile p = tiny_profile();
  const ProfileStability st = profile_stability(p);
  ASSERT_EQ(st.spread_p90.size(), 4u);
  EXPECT_NEAR(st.spread_p90[0], 0.2f, 1e-6f);
  EXPECT_NEAR(st.spread_p90[2], 0.2f, 1e-6f);
  EXPECT_NEAR(st.max_std, 0.204124, 1e-6);
  EXPECT_NEAR(st.intrinsic_coverage, 0.5, 1e-12);
  // Over all heads: each sample against the mean ordering (0.5, 0.5, 0.25, 0.375).
  const std::vector<double> mean{0.5, 0.5, 0.25, 0.375};
  double sum = 0, mn = 1;
  for (int s = 0; s < 3; ++s) {
    const double r = *spearman(
        std::span<const double>(p.raw_ratio).subspan(static_cast<size_t>(s) * 4, 4), mean);
    sum += r;
    mn = std::min(mn, r);
  }
  EXPECT_NEAR(st.global_spearman_mean, sum / 3, 1e-12);
  EXPECT_NEAR(st.global_spearman_min, mn, 1e-12);
  EXPECT_EQ(st.global_undefined, 0);
  // Per layer: layer 0's mean ordering is constant (0.5, 0.5) → undefined in all 3 samples,
  // counted as 0; layer 1: (0.25, 0.375) vs samples (0.25, 0.375) (0.5, 0.375) (0, 0.375)
  // → +1, -1, +1, mean 1/3.
  EXPECT_EQ(st.per_layer_undefined, 3);
  ASSERT_EQ(st.per_layer_spearman.size(), 2u);
  EXPECT_NEAR(st.per_layer_spearman[0], 0.0, 1e-12);
  EXPECT_NEAR(st.per_layer_spearman[1], 1.0 / 3.0, 1e-12);
  EXPECT_NEAR(st.per_layer_spearman_mean, 1.0 / 6.0, 1e-12);
  EXPECT_NEAR(st.per_layer_spearman_min, 0.0, 1e-12);
}

TEST(Budget, FractionsFollowTheFormula) {
  const RetentionProfile p = tiny_profile();  // base ratio 0.5
  const auto b0 = budget_fractions(p, 0.5, 0.0);
  ASSERT_EQ(b0.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(b0[i], p.mean[i]) << i;  // alpha 0: the mean
  const auto b2 = budget_fractions(p, 0.5, 2.0);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(b2[i], p.mean[i] + 2.0f * p.std_dev[i], 1e-6f) << i;  // the paper's mu + 2 sigma
  // Alpha moves each budget by alpha · sigma: heads with sigma 0 do not move.
  EXPECT_FLOAT_EQ(b2[1], b0[1]);
  EXPECT_GT(b2[0], b0[0]);
  // Ratio rescales linearly.
  const auto half = budget_fractions(p, 0.25, 2.0);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(half[i], 0.5f * b2[i], 1e-6f) << i;
  // Clipping to [0, 1].
  for (float b : budget_fractions(p, 5.0, 2.0)) EXPECT_FLOAT_EQ(b, 1.0f);
  const auto negative = budget_fractions(p, 0.5, -100.0);  // heads with sigma > 0 fall to 0
  EXPECT_EQ(negative, (std::vector<float>{0.0f, p.mean[1], 0.0f, p.mean[3]}));
  for (float b : budget_fractions(p, -1.0, 2.0)) EXPECT_FLOAT_EQ(b, 0.0f);
  // Real profile: mean budget over heads rises with alpha, is in [0, 1].
  auto real = load_profile(testing::profile_path("snapkv", "qwen3-4b-instruct-2507", false));
  ASSERT_TRUE(real.ok()) << real.message();
  double prev = -1;
  for (double alpha : {0.0, 1.0, 2.0, 3.0}) {
    const auto b = budget_fractions(*real, 0.3, alpha);
    double sum = 0;
    for (float x : b) {
      ASSERT_GE(x, 0.0f);
      ASSERT_LE(x, 1.0f);
      sum += static_cast<double>(x);
    }
    EXPECT_GT(sum, prev);
    prev = sum;
  }
}

TEST(Budget, LengthUsesTheProfileDefinition) {
  // total 1032, sink 32, window 100: evictable context 1000.
  EXPECT_EQ(budget_length(0.25f, 1032, 32, 100), 32 + 100 + 250);
  EXPECT_EQ(budget_length(0.0f, 1032, 32, 100), 132);
  EXPECT_EQ(budget_length(0.2501f, 1032, 32, 100), 32 + 100 + 251);    // ceil
  EXPECT_EQ(budget_length(0.25f, 1032, 32, 100, 16), 32 + 100 + 256);  // whole 16-token blocks
  EXPECT_EQ(budget_length(1.0f, 1032, 32, 100), 1032);                 // clipped to total
  EXPECT_EQ(budget_length(2.0f, 1032, 32, 100), 1032);
  EXPECT_EQ(budget_length(-1.0f, 1032, 32, 100), 132);
  EXPECT_EQ(budget_length(NAN, 1032, 32, 100), 132);
  EXPECT_EQ(budget_length(0.5f, 20, 32, 100), 20);  // shorter than sink + window: keep all
  EXPECT_EQ(budget_length(0.5f, 0, 32, 100), 0);
  EXPECT_EQ(budget_length(0.5f, -5, 32, 100), 0);
  // Inverse of the profile's retention: (len - sink - window) / (total - sink) ≈ b.
  const int64_t total = 24596;
  const int64_t len = budget_length(0.13f, total, 32, 4096);
  EXPECT_NEAR(static_cast<double>(len - 32 - 4096) / (total - 32), 0.13, 1.0 / (total - 32));
  // Monotone in total and in b; never above total.
  for (float b : {0.0f, 0.05f, 0.3f, 0.77f, 1.0f}) {
    int64_t prev_len = 0;
    for (int64_t t = 0; t <= 6000; t += 7) {
      const int64_t l = budget_length(b, t, 32, 4096, 16);
      ASSERT_GE(l, prev_len) << b << " " << t;
      ASSERT_LE(l, t);
      ASSERT_GE(l, std::min<int64_t>(t, 32 + 4096));
      ASSERT_GE(budget_length(std::min(1.0f, b + 0.1f), t, 32, 4096, 16), l);
      prev_len = l;
    }
  }
}

}  // namespace
}  // namespace tangram
