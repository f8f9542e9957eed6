// The KV compression scorers against plain double-precision references (scorer_reference.h)
// on small random heads, plus behaviour and error tests.
#include "compress/scorer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/rope.h"
#include "scorer_reference.h"

namespace tangram {
namespace {

using testing::ref::HeadData;
using testing::ref::RopeSpec;

// A random KV head: float buffers for the scorer and the same data in double for the reference.
struct HeadCase {
  HeadData data;
  std::vector<float> keys, values, queries;  // float copies of data's
  HeadScoreInput input(const Rope* rope = nullptr) {
    HeadScoreInput in;
    in.head_dim = data.head_dim;
    in.head_dim_v = data.head_dim_v;
    in.n = data.n();
    in.keys = keys.data();
    in.values = values.data();
    in.positions = data.positions.data();
    in.q_per_kv = data.group;
    in.n_queries = data.n_queries();
    in.queries = queries.data();
    in.query_positions = data.query_positions.data();
    in.rope = rope;
    in.next_position = data.next_position;
    return in;
  }
};

enum class QueryPlacement { Observation, Reconstruction };

// Pre-RoPE keys and queries ~ N(0, scale²) (plus a shared offset, so queries have a non-zero
// mean), then rotated at their positions; positions ascend with gaps (an earlier compression).
// Observation queries sit at the last n_queries token positions, reconstruction ones after all.
HeadCase random_head(uint32_t seed, int64_t n, int head_dim, int group, int64_t n_queries,
                     QueryPlacement placement, const RopeSpec& rope) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> gap(1, 3);
  HeadCase c;
  HeadData& h = c.data;
  h.head_dim = head_dim;
  h.head_dim_v = head_dim + 4;
  h.group = group;
  int32_t pos = gap(rng) - 1;
  for (int64_t j = 0; j < n; ++j, pos += gap(rng)) h.positions.push_back(pos);
  const int32_t last = h.positions.empty() ? 0 : h.positions.back();
  for (int64_t i = 0; i < n_queries; ++i) {
    h.query_positions.push_back(placement == QueryPlacement::Observation
                                    ? static_cast<int32_t>(last - (n_queries - 1 - i))
                                    : static_cast<int32_t>(last + 1 + i));
  }
  h.next_position =
      (placement == QueryPlacement::Observation ? last : h.query_positions.back()) + 1;
  std::vector<double> offset(static_cast<size_t>(head_dim));
  for (double& o : offset) o = 0.7 * normal(rng);
  auto fill_rotated = [&](std::vector<double>& out, int64_t rows, int heads,
                          const std::vector<int32_t>& at, double scale) {
    for (int64_t r = 0; r < rows; ++r)
      for (int g = 0; g < heads; ++g) {
        std::vector<double> x(static_cast<size_t>(head_dim));
        for (int e = 0; e < head_dim; ++e) x[e] = scale * normal(rng) + offset[e];
        testing::ref::rotate(rope, at[r], 1.0, x.data(), head_dim);
        out.insert(out.end(), x.begin(), x.end());
      }
  };
  fill_rotated(h.keys, n, 1, h.positions, 1.0);
  fill_rotated(h.queries, n_queries, group, h.query_positions, 1.3);
  for (int64_t j = 0; j < n * h.head_dim_v; ++j) h.values.push_back(normal(rng));
  c.keys.assign(h.keys.begin(), h.keys.end());
  c.values.assign(h.values.begin(), h.values.end());
  c.queries.assign(h.queries.begin(), h.queries.end());
  // The reference sees exactly the float inputs.
  h.keys.assign(c.keys.begin(), c.keys.end());
  h.values.assign(c.values.begin(), c.values.end());
  h.queries.assign(c.queries.begin(), c.queries.end());
  return c;
}

std::unique_ptr<Scorer> scorer_or_die(const ScorerOptions& o) {
  auto s = make_scorer(o);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.message());
  return s.ok() ? std::move(s).value() : nullptr;
}

// Tolerance: |got - ref| <= 1e-5 |ref| + 1e-6 max|ref| (float math against double).
void expect_matches(const std::vector<float>& got, const std::vector<double>& ref,
                    const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double max_abs = 0.0;
  for (double r : ref) max_abs = std::max(max_abs, std::abs(r));
  for (size_t j = 0; j < ref.size(); ++j) {
    ASSERT_NEAR(got[j], ref[j], 1e-5 * std::abs(ref[j]) + 1e-6 * max_abs) << what << " entry " << j;
  }
}

std::vector<float> run(const Scorer& s, const HeadScoreInput& in) {
  std::vector<float> out(static_cast<size_t>(in.n), -12345.0f);
  const Status st = s.score(in, out.data());
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.message());
  return out;
}

std::string label(const char* name, int64_t n, int d, int g, int64_t nq) {
  return std::string(name) + " n=" + std::to_string(n) + " d=" + std::to_string(d) +
         " g=" + std::to_string(g) + " nq=" + std::to_string(nq);
}

constexpr int64_t kSizes[] = {1, 5, 37, 130};
constexpr int kHeadDims[] = {8, 16};
constexpr int kGroups[] = {1, 4};
const RopeSpec kPlainRope{RopeLayout::Interleaved, 8, 10000.0};

TEST(ScorerReference, SnapKv) {
  uint32_t seed = 1;
  for (int kernel : {7, 1, 3})
    for (int window : {32, 4})
      for (int64_t n : kSizes)
        for (int d : kHeadDims)
          for (int g : kGroups)
            for (int64_t nq : {int64_t{1}, int64_t{6}, int64_t{40}}) {
              ScorerOptions o;
              o.name = "snapkv";
              o.snap_window = window;
              o.snap_kernel = kernel;
              auto s = scorer_or_die(o);
              ASSERT_NE(s, nullptr);
              HeadCase c =
                  random_head(seed++, n, d, g, nq, QueryPlacement::Observation, kPlainRope);
              expect_matches(run(*s, c.input()), testing::ref::snapkv(c.data, window, kernel),
                             label("snapkv", n, d, g, nq) + " k=" + std::to_string(kernel) +
                                 " w=" + std::to_string(window));
            }
}

TEST(ScorerReference, Tova) {
  auto s = scorer_or_die({.name = "tova"});
  ASSERT_NE(s, nullptr);
  uint32_t seed = 100;
  for (int64_t n : kSizes)
    for (int d : kHeadDims)
      for (int g : kGroups)
        for (int64_t nq : {int64_t{1}, int64_t{3}}) {
          HeadCase c = random_head(seed++, n, d, g, nq, QueryPlacement::Observation, kPlainRope);
          expect_matches(run(*s, c.input()), testing::ref::tova(c.data),
                         label("tova", n, d, g, nq));
        }
}

TEST(ScorerReference, KeyDiff) {
  auto s = scorer_or_die({.name = "keydiff"});
  ASSERT_NE(s, nullptr);
  uint32_t seed = 200;
  for (int64_t n : kSizes)
    for (int d : kHeadDims) {
      HeadCase c = random_head(seed++, n, d, 1, 0, QueryPlacement::Observation, kPlainRope);
      HeadScoreInput in = c.input();
      in.queries = nullptr;  // query-free: must not need them
      in.query_positions = nullptr;
      expect_matches(run(*s, in), testing::ref::keydiff(c.data), label("keydiff", n, d, 1, 0));
    }
}

TEST(ScorerReference, StreamingLlm) {
  auto s = scorer_or_die({.name = "streamingllm"});
  ASSERT_NE(s, nullptr);
  for (int64_t n : kSizes) {
    HeadCase c = random_head(300, n, 8, 1, 0, QueryPlacement::Observation, kPlainRope);
    const std::vector<float> got = run(*s, c.input());
    const std::vector<double> ref = testing::ref::streamingllm(c.data);
    for (size_t j = 0; j < ref.size(); ++j) EXPECT_EQ(got[j], static_cast<float>(ref[j]));
  }
}

TEST(ScorerReference, Kvzip) {
  auto s = scorer_or_die({.name = "kvzip"});
  ASSERT_NE(s, nullptr);
  uint32_t seed = 400;
  for (int64_t n : kSizes)
    for (int d : kHeadDims)
      for (int g : kGroups) {
        // Reconstruction queries (after every entry) and, for the causal mask, observation ones.
        for (QueryPlacement place : {QueryPlacement::Reconstruction, QueryPlacement::Observation}) {
          const int64_t nq = std::max<int64_t>(1, n / 2);
          HeadCase c = random_head(seed++, n, d, g, nq, place, kPlainRope);
          expect_matches(run(*s, c.input()), testing::ref::kvzip(c.data),
                         label("kvzip", n, d, g, nq));
        }
      }
}

ModelConfig rope_config(const RopeSpec& spec, int head_dim) {
  ModelConfig c;
  c.head_dim = head_dim;
  c.head_dim_v = head_dim;
  c.rope_layout = spec.layout;
  c.rope_dim = spec.rope_dim;
  c.rope_base = spec.base;
  return c;
}

TEST(ScorerReference, RopeAgreesWithModelRope) {
  // The reference's rotation is the one model/rope.h applies (the EA test relies on it).
  for (RopeLayout layout : {RopeLayout::Interleaved, RopeLayout::NeoX}) {
    const RopeSpec spec{layout, 8, 500.0};
    const Rope rope(rope_config(spec, 16), {});
    std::vector<float> x(16), cos(4), sin(4);
    std::vector<double> xd(16);
    for (int e = 0; e < 16; ++e) xd[e] = x[e] = 0.1f * static_cast<float>(e + 1);
    rope.tables(37, 1, cos.data(), sin.data());
    rope.apply(x.data(), 1, 1, 16, cos.data(), sin.data());
    testing::ref::rotate(spec, 37, 1.0, xd.data(), 16);
    for (int e = 0; e < 16; ++e) EXPECT_NEAR(x[e], xd[e], 1e-6) << e;
  }
}

TEST(ScorerReference, ExpectedAttention) {
  uint32_t seed = 500;
  struct Variant {
    int queries, skip, future;
    bool covariance, value_norm;
  };
  const Variant variants[] = {
      {256, 4, 512, true, true},  // published defaults
      {256, 4, 7, true, false},
      {8, 0, 300, false, true},  // spans two tables() chunks of future positions
      {256, 4, 3, false, false},
  };
  for (const Variant& v : variants)
    for (RopeLayout layout : {RopeLayout::Interleaved, RopeLayout::NeoX})
      for (int64_t n : kSizes)
        for (int d : kHeadDims)
          for (int g : kGroups)
            // 3 rows: none skipped; 9: low-rank Σ path; 40: full d×d Σ path (n_obs > d).
            for (int64_t nq : {int64_t{3}, int64_t{9}, int64_t{40}}) {
              const RopeSpec spec{layout, d == 16 ? 8 : d, 10000.0};  // partial rotary at d=16
              const Rope rope(rope_config(spec, d), {});
              ScorerOptions o;
              o.name = "expected_attention";
              o.ea_queries = v.queries;
              o.ea_skip = v.skip;
              o.ea_future = v.future;
              o.ea_covariance = v.covariance;
              o.ea_value_norm = v.value_norm;
              auto s = scorer_or_die(o);
              ASSERT_NE(s, nullptr);
              HeadCase c = random_head(seed++, n, d, g, nq, QueryPlacement::Observation, spec);
              testing::ref::EaParams p{v.skip, v.future, 1e-2, v.covariance, v.value_norm};
              expect_matches(
                  run(*s, c.input(&rope)), testing::ref::expected_attention(c.data, spec, p),
                  label("expected_attention", n, d, g, nq) + " future=" + std::to_string(v.future));
            }
}

// ---- behaviour ------------------------------------------------------------------------------

size_t argmax(const std::vector<float>& v) {
  return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// A head whose keys all have the query's norm, one of them (at `hit`) equal to the query.
HeadCase head_with_matching_key(int64_t n, int64_t hit, int group) {
  HeadCase c = random_head(7, n, 16, group, 1, QueryPlacement::Observation, kPlainRope);
  std::vector<float> q(c.queries.begin(), c.queries.begin() + 16);
  for (int g = 1; g < group; ++g) std::copy(q.begin(), q.end(), c.queries.begin() + g * 16);
  float qn = 0.0f;
  for (float x : q) qn += x * x;
  for (int64_t j = 0; j < n; ++j) {
    float kn = 0.0f;
    for (int e = 0; e < 16; ++e) kn += c.keys[j * 16 + e] * c.keys[j * 16 + e];
    for (int e = 0; e < 16; ++e) c.keys[j * 16 + e] *= std::sqrt(qn / kn);
  }
  std::copy(q.begin(), q.end(), c.keys.begin() + hit * 16);
  return c;
}

TEST(ScorerBehaviour, KeyEqualToQueryScoresHighest) {
  for (int group : {1, 4}) {
    HeadCase c = head_with_matching_key(50, 21, group);
    for (const char* name : {"tova", "snapkv", "kvzip"}) {
      ScorerOptions o;
      o.name = name;
      o.snap_kernel = 1;  // no pooling, so the maximum is unique
      auto s = scorer_or_die(o);
      ASSERT_NE(s, nullptr);
      EXPECT_EQ(argmax(run(*s, c.input())), 21u) << name << " group " << group;
    }
  }
}

TEST(ScorerBehaviour, SnapKvMaxPoolSpreadsASpike) {
  HeadCase c = head_with_matching_key(60, 30, 1);
  for (int j = 0; j < 60; ++j)
    if (j != 30)
      for (int e = 0; e < 16; ++e) c.keys[j * 16 + e] *= 0.01f;  // the spike dominates
  ScorerOptions o;
  o.name = "snapkv";
  o.snap_kernel = 7;
  auto s = scorer_or_die(o);
  ASSERT_NE(s, nullptr);
  const std::vector<float> got = run(*s, c.input());
  for (int j = 27; j <= 33; ++j) EXPECT_EQ(got[j], got[30]) << j;
  EXPECT_LT(got[26], 0.5f * got[30]);
  EXPECT_LT(got[34], 0.5f * got[30]);
}

TEST(ScorerBehaviour, StreamingLlmRanksRecentHighest) {
  auto s = scorer_or_die({.name = "streamingllm"});
  ASSERT_NE(s, nullptr);
  HeadCase c = random_head(9, 40, 8, 1, 0, QueryPlacement::Observation, kPlainRope);
  const std::vector<float> got = run(*s, c.input());
  for (size_t j = 1; j < got.size(); ++j) EXPECT_GT(got[j], got[j - 1]);
}

TEST(ScorerBehaviour, KeyDiffKeepsTheOutlier) {
  auto s = scorer_or_die({.name = "keydiff"});
  ASSERT_NE(s, nullptr);
  HeadCase c = random_head(11, 30, 8, 1, 0, QueryPlacement::Observation, kPlainRope);
  std::mt19937 rng(3);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  for (int j = 0; j < 30; ++j)
    for (int e = 0; e < 8; ++e) c.keys[j * 8 + e] = (e == 0 ? 1.0f : 0.2f) + noise(rng);
  for (int e = 0; e < 8; ++e) c.keys[13 * 8 + e] = e == 0 ? -1.0f : 0.3f;
  EXPECT_EQ(argmax(run(*s, c.input())), 13u);
}

TEST(ScorerBehaviour, CausalMaskExcludesLaterEntries) {
  // One query at entry 9's position: entries 10.. are invisible to it.
  HeadCase c = random_head(13, 20, 8, 2, 1, QueryPlacement::Observation, kPlainRope);
  c.data.query_positions[0] = c.data.positions[9];
  for (const char* name : {"tova", "kvzip", "snapkv"}) {
    ScorerOptions o;
    o.name = name;
    o.snap_kernel = 1;
    auto s = scorer_or_die(o);
    ASSERT_NE(s, nullptr);
    const std::vector<float> before = run(*s, c.input());
    float sum = 0.0f;
    for (int j = 0; j < 20; ++j) {
      if (j >= 10) {
        EXPECT_EQ(before[j], 0.0f) << name << " " << j;
      }
      sum += before[j];
    }
    if (std::string(name) == "tova") {  // a mean of softmaxes over the visible entries
      EXPECT_NEAR(sum, 1.0f, 1e-5f) << name;
    }
    HeadCase changed = c;
    for (size_t e = 10 * 8; e < changed.keys.size(); ++e) changed.keys[e] = 50.0f;
    EXPECT_EQ(run(*s, changed.input()), before) << name;
  }
}

TEST(ScorerBehaviour, ExpectedAttentionZeroValueScoresZero) {
  const RopeSpec spec{RopeLayout::NeoX, 8, 10000.0};
  const Rope rope(rope_config(spec, 8), {});
  auto s = scorer_or_die({.name = "expected_attention"});
  ASSERT_NE(s, nullptr);
  HeadCase c = random_head(17, 12, 8, 2, 10, QueryPlacement::Observation, spec);
  std::fill(c.values.begin() + 5 * c.data.head_dim_v, c.values.begin() + 6 * c.data.head_dim_v,
            0.0f);
  const std::vector<float> got = run(*s, c.input(&rope));
  EXPECT_EQ(got[5], 0.0f);
  for (int j = 0; j < 12; ++j)
    if (j != 5) {
      EXPECT_GT(got[j], 0.0f);
    }
}

TEST(ScorerBehaviour, QueriesWantedAndSources) {
  ScorerOptions o;
  o.name = "snapkv";
  EXPECT_EQ(scorer_or_die(o)->queries_wanted(1000), 32);
  EXPECT_EQ(scorer_or_die(o)->queries_wanted(10), 10);
  EXPECT_EQ(scorer_or_die(o)->query_source(), QuerySource::Observation);
  o.name = "tova";
  EXPECT_EQ(scorer_or_die(o)->queries_wanted(1000), 1);
  o.name = "expected_attention";
  EXPECT_EQ(scorer_or_die(o)->queries_wanted(1000), 256);
  EXPECT_EQ(scorer_or_die(o)->queries_wanted(100), 100);
  o.name = "kvzip";
  EXPECT_EQ(scorer_or_die(o)->queries_wanted(1000), 1000);
  EXPECT_EQ(scorer_or_die(o)->query_source(), QuerySource::Reconstruction);
  for (const char* name : {"keydiff", "streamingllm"}) {
    o.name = name;
    EXPECT_EQ(scorer_or_die(o)->queries_wanted(1000), 0);
    EXPECT_EQ(scorer_or_die(o)->query_source(), QuerySource::None);
  }
  for (const std::string& name : scorer_names()) {
    o.name = name;
    EXPECT_EQ(scorer_or_die(o)->name(), name);
  }
}

// ---- errors ---------------------------------------------------------------------------------

TEST(ScorerErrors, UnknownNameListsValidNames) {
  auto s = make_scorer({.name = "h2o"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("h2o"), std::string::npos);
  for (const std::string& name : scorer_names())
    EXPECT_NE(s.message().find(name), std::string::npos) << name;
  EXPECT_EQ(scorer_names().size(), 6u);
}

TEST(ScorerErrors, BadOptions) {
  for (int kernel : {0, -1, 2, 8}) {
    ScorerOptions o;
    o.name = "snapkv";
    o.snap_kernel = kernel;
    auto s = make_scorer(o);
    ASSERT_FALSE(s.ok()) << kernel;
    EXPECT_NE(s.message().find("snap_kernel"), std::string::npos);
  }
  ScorerOptions o;
  o.name = "snapkv";
  o.snap_window = 0;
  EXPECT_FALSE(make_scorer(o).ok());
  o.name = "expected_attention";
  o.snap_window = 32;
  o.ea_future = 0;
  EXPECT_FALSE(make_scorer(o).ok());
  o.ea_future = 512;
  o.ea_queries = 0;
  EXPECT_FALSE(make_scorer(o).ok());
  o.ea_queries = 256;
  o.ea_epsilon = -1.0f;
  EXPECT_FALSE(make_scorer(o).ok());
}

TEST(ScorerErrors, BadInputIsAnErrorNotACrash) {
  const RopeSpec spec{RopeLayout::Interleaved, 8, 10000.0};
  const Rope rope(rope_config(spec, 8), {});
  HeadCase c = random_head(19, 10, 8, 2, 4, QueryPlacement::Observation, spec);
  std::vector<float> out(10);
  for (const std::string& name : scorer_names()) {
    auto s = scorer_or_die({.name = name});
    ASSERT_NE(s, nullptr);
    const bool query_aware = s->query_source() != QuerySource::None;
    auto expect_error = [&](HeadScoreInput in, const char* what, float* scores) {
      EXPECT_FALSE(s->score(in, scores).ok()) << name << ": " << what;
    };
    HeadScoreInput good = c.input(&rope);
    ASSERT_TRUE(s->score(good, out.data()).ok()) << name;
    HeadScoreInput in = good;
    in.n = -1;
    expect_error(in, "negative n", out.data());
    in = good;
    in.head_dim = 0;
    expect_error(in, "head_dim 0", out.data());
    in = good;
    in.q_per_kv = 0;
    expect_error(in, "q_per_kv 0", out.data());
    in = good;
    in.positions = nullptr;
    if (name != "keydiff" && name != "expected_attention") {
      expect_error(in, "null positions", out.data());
    }
    in = good;
    expect_error(in, "null scores", nullptr);
    in = good;
    in.keys = nullptr;
    if (name != "streamingllm") expect_error(in, "null keys", out.data());
    if (query_aware) {
      in = good;
      in.n_queries = 0;
      expect_error(in, "no queries", out.data());
      in = good;
      in.queries = nullptr;
      expect_error(in, "null queries", out.data());
      in = good;
      in.query_positions = nullptr;
      expect_error(in, "null query positions", out.data());
    }
    // n == 0 is fine and writes nothing, whatever the (unused) buffers are.
    in = good;
    in.n = 0;
    in.keys = nullptr;
    in.values = nullptr;
    in.positions = nullptr;
    EXPECT_TRUE(s->score(in, nullptr).ok()) << name;
  }
  auto ea = scorer_or_die({.name = "expected_attention"});
  HeadScoreInput in = c.input(nullptr);
  EXPECT_FALSE(ea->score(in, out.data()).ok()) << "null rope";
  const Rope wide(rope_config({RopeLayout::Interleaved, 16, 10000.0}, 16), {});
  in = c.input(&wide);  // rope_dim 16 > head_dim 8
  EXPECT_FALSE(ea->score(in, out.data()).ok()) << "rope wider than head";
  in = c.input(&rope);
  in.values = nullptr;
  EXPECT_FALSE(ea->score(in, out.data()).ok()) << "null values with value norm";
  auto snap = scorer_or_die({.name = "snapkv"});
  HeadCase unsorted = c;
  std::swap(unsorted.data.positions[2], unsorted.data.positions[3]);
  EXPECT_FALSE(snap->score(unsorted.input(), out.data()).ok()) << "positions not ascending";
}

}  // namespace
}  // namespace tangram
