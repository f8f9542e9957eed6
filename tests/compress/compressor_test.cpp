// The compressor on real caches of a generated model: attention over the compressed cache equals
// reference attention over exactly the kept tokens (keys recomputed by a full, uncompressed
// prefill), for every policy and group size; budgets are never exceeded; the tangram policy's
// predicted footprint equals the pages held; tangram and dynamic keep identical token sets when
// their budgets coincide.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "attention/dense_attention.h"
#include "attention/paged_attention.h"
#include "compress/budgets.h"
#include "compress/cluster.h"
#include "compress/compressor.h"
#include "compress/profile.h"
#include "compress_test_util.h"
#include "kernels/half.h"
#include "model/model.h"
#include "support/test_support.h"
#include "synth/synth.h"

namespace tangram {
namespace {

std::vector<int32_t> tokens(int64_t n, uint32_t seed, int64_t vocab) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(3, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = d(rng);
  return t;
}

// A profile for the test model with the given per-head fractions (as means, zero spread).
std::string write_profile(const std::vector<float>& fractions, int L, int H,
                          const std::string& name) {
  return testing::write_test_profile(fractions, L, H, name, /*samples=*/2);
}

struct PagedSetup {
  std::unique_ptr<BlockPool> pool;
  std::unique_ptr<PagedKvCache> cache;
};

PagedSetup prefill(Model& m, const Compressor& c, const std::vector<int32_t>& toks, int page_tokens,
                   ThreadPool& threads, std::vector<float>* queries, int64_t q_rows) {
  PagedSetup s;
  const ModelConfig& cfg = m.config();
  PageGeometry geo{page_tokens, c.group_size(), cfg.head_dim, cfg.head_dim_v, KvType::F32};
  auto pool = BlockPool::create(geo, 32u << 20, false);
  EXPECT_TRUE(pool.ok()) << pool.message();
  s.pool = std::move(pool).value();
  auto cache = PagedKvCache::create(m.kv_shape(), 1024, *s.pool, c.group_map());
  EXPECT_TRUE(cache.ok()) << cache.message();
  s.cache = std::move(cache).value();
  const auto n = static_cast<int64_t>(toks.size());
  SequenceStep step{s.cache.get(), toks.data(), n, 0, nullptr, false};
  if (queries != nullptr && q_rows > 0) {
    queries->assign(static_cast<size_t>(cfg.n_layers * q_rows * cfg.q_dim()), 0.0f);
    step.capture_q = queries->data();
    step.capture_from = n - q_rows;
    step.capture_rows = q_rows;
  }
  const Status st = m.forward_step(std::span<const SequenceStep>(&step, 1), threads);
  EXPECT_TRUE(st.ok()) << st.message();
  return s;
}

// One stored entry's key and value rows (F32 pool).
void read_entry(const PagedKvCache& cache, int l, int h, int64_t e, float* k, float* v) {
  const KvHeadView view = cache.head_view(l, h);
  const KvShape& s = cache.shape();
  view.for_each_run(e, e + 1, [&](int64_t, const uint8_t* kr, const uint8_t* vr, int64_t) {
    std::memcpy(k, kr, static_cast<size_t>(s.head_dim) * sizeof(float));
    std::memcpy(v, vr, static_cast<size_t>(s.head_dim_v) * sizeof(float));
  });
}

// Attention of a fresh query over the compressed cache vs dense attention over the kept
// positions' keys and values taken from an uncompressed prefill of the same tokens.
void expect_attention_over_kept(Model& m, const PagedKvCache& cache,
                                const std::vector<int32_t>& toks, ThreadPool& threads,
                                const std::string& what) {
  const ModelConfig& c = m.config();
  auto ref_pool = BlockPool::create(cache.pool().geometry(), 32u << 20, false);
  ASSERT_TRUE(ref_pool.ok());
  auto full_r = PagedKvCache::create(m.kv_shape(), 1024, **ref_pool,
                                     std::make_shared<const HeadGroupMap>(cache.head_groups()));
  ASSERT_TRUE(full_r.ok());
  PagedKvCache& full = **full_r;
  ASSERT_TRUE(
      m.forward(full, toks.data(), static_cast<int64_t>(toks.size()), 0, nullptr, threads).ok());
  std::mt19937 rng(11);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const int qpk = c.n_head / c.n_kv_head;
  std::vector<float> q(static_cast<size_t>(c.q_dim()));
  for (auto& x : q) x = d(rng);
  const int64_t pos = static_cast<int64_t>(toks.size()) - 1;  // sees every stored entry
  for (int l = 0; l < c.n_layers; ++l) {
    std::vector<float> got(static_cast<size_t>(c.n_head * c.head_dim_v));
    AttentionWorkspace ws;
    const AttentionItem item{&cache, q.data(), got.data(), 1, pos};
    ASSERT_TRUE(paged_attention(l, std::span<const AttentionItem>(&item, 1), threads, ws).ok());
    for (int h = 0; h < c.n_kv_head; ++h) {
      const KvHeadView v = cache.head_view(l, h);
      // Keys/values of the kept positions from the uncompressed reference cache.
      std::vector<float> k, val;
      for (int64_t e = 0; e < v.length; ++e) {
        const int64_t p = cache.entry_position(l, h, e);
        std::vector<float> kr(static_cast<size_t>(c.head_dim)),
            vr(static_cast<size_t>(c.head_dim_v));
        read_entry(full, l, h, p, kr.data(), vr.data());
        k.insert(k.end(), kr.begin(), kr.end());
        val.insert(val.end(), vr.begin(), vr.end());
      }
      for (int g = 0; g < qpk; ++g) {
        const int qh = h * qpk + g;
        // Plain softmax attention in double.
        double mx = -1e300;
        std::vector<double> sc(static_cast<size_t>(v.length));
        for (int64_t e = 0; e < v.length; ++e) {
          double dot = 0;
          for (int i = 0; i < c.head_dim; ++i)
            dot += static_cast<double>(q[static_cast<size_t>(qh * c.head_dim + i)]) *
                   static_cast<double>(k[static_cast<size_t>(e * c.head_dim + i)]);
          sc[static_cast<size_t>(e)] = dot / std::sqrt(static_cast<double>(c.head_dim));
          mx = std::max(mx, sc[static_cast<size_t>(e)]);
        }
        double sum = 0;
        for (auto& x : sc) sum += (x = std::exp(x - mx));
        for (int i = 0; i < c.head_dim_v; ++i) {
          double o = 0;
          for (int64_t e = 0; e < v.length; ++e)
            o += sc[static_cast<size_t>(e)] *
                 static_cast<double>(val[static_cast<size_t>(e * c.head_dim_v + i)]);
          EXPECT_NEAR(got[static_cast<size_t>(qh * c.head_dim_v + i)], o / sum, 1e-4)
              << what << " layer " << l << " head " << qh;
        }
      }
    }
  }
}

struct PolicyCase {
  KvPolicy policy;
  const char* scorer;
  int group_size;
  BudgetLevel level;
  int page_tokens = 16;  // 64: columns cut into 32-slot runs (block_pool.h)
};

class CompressorPolicies : public ::testing::TestWithParam<PolicyCase> {};

TEST_P(CompressorPolicies, AttentionOverCompressedCacheEqualsAttentionOverKeptTokens) {
  const PolicyCase pc = GetParam();
  Model& m = testing::small_compress_model();
  const ModelConfig& cfg = m.config();
  ThreadPool threads(2);
  CompressionOptions o;
  o.policy = pc.policy;
  o.ratio = 0.3;
  o.sink = 4;
  o.window = 16;
  o.level = pc.level;
  o.scorer.name = pc.scorer;
  if (pc.policy == KvPolicy::Tangram) {
    std::vector<float> f(static_cast<size_t>(cfg.n_layers * cfg.n_kv_head));
    for (size_t i = 0; i < f.size(); ++i) f[i] = 0.05f + 0.08f * static_cast<float>(i % 5);
    o.profile = write_profile(f, cfg.n_layers, cfg.n_kv_head, "policy-profile.json");
  }
  auto comp = Compressor::create(o, cfg, m.rope(), pc.group_size);
  ASSERT_TRUE(comp.ok()) << comp.message();
  const auto toks = tokens(300, 5, cfg.vocab);
  const int64_t n_q = (*comp)->queries_wanted(300);
  std::vector<float> queries;
  PagedSetup s = prefill(m, **comp, toks, pc.page_tokens, threads, &queries, n_q);
  const int64_t pages_before = s.cache->pages_held();
  auto rep = (*comp)->compress(*s.cache, queries.empty() ? nullptr : queries.data(), n_q, 300 - n_q,
                               threads);
  ASSERT_TRUE(rep.ok()) << rep.message();
  EXPECT_EQ(rep->pages_before, pages_before);
  EXPECT_LT(rep->entries_after, rep->entries_before);
  EXPECT_LT(s.cache->pages_held(), pages_before);
  EXPECT_EQ(s.cache->n_positions(), 300);
  EXPECT_TRUE(s.pool->check_consistency().ok());
  // Budgets: deterministic policies keep exactly their lengths; every head keeps its sink and
  // window.
  const auto target = (*comp)->target_lengths(300);
  for (int l = 0; l < cfg.n_layers; ++l)
    for (int h = 0; h < cfg.n_kv_head; ++h) {
      if (!target.empty()) {
        EXPECT_EQ(s.cache->length(l, h), target[static_cast<size_t>(l * cfg.n_kv_head + h)]);
      }
      EXPECT_EQ(s.cache->entry_position(l, h, 0), 0);
      EXPECT_EQ(s.cache->entry_position(l, h, s.cache->length(l, h) - 1), 299);
    }
  if (pc.policy == KvPolicy::Tangram || pc.policy == KvPolicy::Uniform) {
    EXPECT_EQ(s.cache->pages_held(), (*comp)->predicted_pages(300, pc.page_tokens));
  }
  expect_attention_over_kept(m, *s.cache, toks, threads,
                             std::string(kv_policy_name(pc.policy)) + "/" + pc.scorer);
}

INSTANTIATE_TEST_SUITE_P(
    Policies, CompressorPolicies,
    ::testing::Values(PolicyCase{KvPolicy::Uniform, "keydiff", 0, BudgetLevel::Uniform},
                      PolicyCase{KvPolicy::Dynamic, "keydiff", 0, BudgetLevel::PerLayer},
                      PolicyCase{KvPolicy::Dynamic, "snapkv", 0, BudgetLevel::CrossLayer},
                      PolicyCase{KvPolicy::Tangram, "keydiff", 1, BudgetLevel::PerLayer},
                      PolicyCase{KvPolicy::Tangram, "tova", 2, BudgetLevel::PerLayer},
                      PolicyCase{KvPolicy::Tangram, "expected_attention", 4, BudgetLevel::PerLayer},
                      PolicyCase{KvPolicy::Tangram, "keydiff", 3,
                                 BudgetLevel::PerLayer},  // global, a short group
                      PolicyCase{KvPolicy::Uniform, "streamingllm", 0, BudgetLevel::Uniform},
                      PolicyCase{KvPolicy::Uniform, "keydiff", 0, BudgetLevel::Uniform, 64},
                      PolicyCase{KvPolicy::Tangram, "keydiff", 3, BudgetLevel::PerLayer, 64}),
    [](const auto& tinfo) {
      std::string n = std::string(kv_policy_name(tinfo.param.policy)) + "_" + tinfo.param.scorer +
                      "_G" + std::to_string(tinfo.param.group_size);
      if (tinfo.param.page_tokens != 16) n += "_P" + std::to_string(tinfo.param.page_tokens);
      return n;
    });

// The closed-form footprint of the tangram policy equals the pages held after compression, for
// random contexts, ratios, alphas, group sizes (3 leaves a short last global group) and page
// sizes, under global (cross-layer) and per-layer maps.
TEST(Compressor, PredictedFootprintEqualsPagesHeld) {
  Model& m = testing::small_compress_model();
  const ModelConfig& cfg = m.config();
  ThreadPool threads(2);
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> frac(0.0f, 0.6f);
  for (int trial = 0; trial < 8; ++trial) {
    std::vector<float> f(static_cast<size_t>(cfg.n_layers * cfg.n_kv_head));
    for (auto& x : f) x = frac(rng);
    CompressionOptions o;
    o.policy = KvPolicy::Tangram;
    o.ratio = 0.2 + 0.1 * (trial % 4);
    o.alpha = trial % 3;
    o.sink = 4;
    o.window = 8 + trial;
    o.budget_scaling = (trial / 2) % 2 == 0 ? BudgetScaling::Footprint : BudgetScaling::None;
    o.profile = write_profile(f, cfg.n_layers, cfg.n_kv_head,
                              "footprint-" + std::to_string(trial) + ".json");
    o.per_layer_groups = trial % 4 == 3;
    const int G = trial % 4 == 1 ? 3 : 1 << (trial % 3);
    const int P = trial % 2 == 0 ? 16 : 8;
    auto comp = Compressor::create(o, cfg, m.rope(), G);
    ASSERT_TRUE(comp.ok()) << comp.message();
    const int64_t n = 40 + 37 * trial;
    const int64_t predicted = (*comp)->predicted_pages(n, P);
    PagedSetup s = prefill(m, **comp, tokens(n, 100 + static_cast<uint32_t>(trial), cfg.vocab), P,
                           threads, nullptr, 0);
    ASSERT_TRUE((*comp)->compress(*s.cache, nullptr, 0, 0, threads).ok());
    EXPECT_EQ(s.cache->pages_held(), predicted) << "trial " << trial;
    EXPECT_EQ(s.pool->used_pages(), predicted);
    // Unscaled budgets move as the formula says: a larger ratio or alpha never shrinks a head.
    if (o.budget_scaling != BudgetScaling::None) continue;
    CompressionOptions more = o;
    more.ratio = std::min(1.0, o.ratio + 0.2);
    more.alpha = o.alpha + 1;
    auto bigger = Compressor::create(more, cfg, m.rope(), G);
    ASSERT_TRUE(bigger.ok());
    const auto a = (*comp)->target_lengths(n), b = (*bigger)->target_lengths(n);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_GE(b[i], a[i]);
  }
}

// The F16 read-back (vectorised where F16C is built) against the F32 one: a cache of F16 pages
// and a cache of F32 pages holding the same (F16-representable) rows, head sizes with a tail
// beyond the 8-wide blocks, keep exactly the same entries.
TEST(Compressor, F16PagesAreReadBackAsTheSameFloatsAsF32Pages) {
  const Model& m = testing::small_compress_model();
  ModelConfig cfg = m.config();
  cfg.head_dim = 12;
  cfg.head_dim_v = 20;
  const KvShape shape{cfg.n_layers, cfg.n_head, cfg.n_kv_head, cfg.head_dim, cfg.head_dim_v};
  ThreadPool threads(2);
  for (const KvPolicy policy : {KvPolicy::Uniform, KvPolicy::Dynamic}) {
    CompressionOptions o;
    o.policy = policy;
    o.ratio = 0.4;
    o.sink = 2;
    o.window = 5;
    auto comp = Compressor::create(o, cfg, m.rope(), 0);
    ASSERT_TRUE(comp.ok()) << comp.message();
    const int64_t n = 77;
    std::mt19937 rng(5);
    std::normal_distribution<float> d(0.0f, 2.0f);
    // Per layer: keys [n][n_kv_head][head_dim], values [n][n_kv_head][head_dim_v], F16-exact.
    std::vector<std::vector<float>> k(static_cast<size_t>(cfg.n_layers)), v(k.size());
    for (size_t l = 0; l < k.size(); ++l) {
      k[l].resize(static_cast<size_t>(n * cfg.n_kv_head * cfg.head_dim));
      v[l].resize(static_cast<size_t>(n * cfg.n_kv_head * cfg.head_dim_v));
      for (auto* rows : {&k[l], &v[l]})
        for (float& x : *rows) x = half::fp16_to_fp32_portable(half::fp32_to_fp16_portable(d(rng)));
    }
    std::vector<std::vector<int64_t>> kept[2];
    for (int t = 0; t < 2; ++t) {
      const KvType type = t == 0 ? KvType::F16 : KvType::F32;
      auto pool = BlockPool::create(
          PageGeometry{8, (*comp)->group_size(), cfg.head_dim, cfg.head_dim_v, type}, 4u << 20,
          false);
      ASSERT_TRUE(pool.ok()) << pool.message();
      auto cache = PagedKvCache::create(shape, 256, **pool, (*comp)->group_map());
      ASSERT_TRUE(cache.ok()) << cache.message();
      ASSERT_TRUE((*cache)->reserve(n).ok());
      for (int l = 0; l < cfg.n_layers; ++l)
        ASSERT_TRUE(
            (*cache)
                ->write(l, 0, k[static_cast<size_t>(l)].data(), v[static_cast<size_t>(l)].data(), n)
                .ok());
      ASSERT_TRUE((*comp)->compress(**cache, nullptr, 0, 0, threads).ok());
      for (int l = 0; l < cfg.n_layers; ++l)
        for (int h = 0; h < cfg.n_kv_head; ++h) {
          std::vector<int64_t> pos;
          for (int64_t e = 0; e < (*cache)->length(l, h); ++e)
            pos.push_back((*cache)->entry_position(l, h, e));
          kept[t].push_back(pos);
        }
    }
    EXPECT_EQ(kept[0], kept[1]) << kv_policy_name(policy);
  }
}

// With one head per group and budgets equal to what the run-time spread chose, the tangram
// policy keeps exactly the tokens the dynamic policy keeps.
TEST(Compressor, TangramAndDynamicKeepTheSameTokensWhenBudgetsCoincide) {
  Model& m = testing::small_compress_model();
  const ModelConfig& cfg = m.config();
  ThreadPool threads(2);
  const int64_t n = 400;
  const auto toks = tokens(n, 9, cfg.vocab);
  CompressionOptions dyn;
  dyn.policy = KvPolicy::Dynamic;
  dyn.ratio = 0.3;
  dyn.sink = 4;
  dyn.window = 16;
  dyn.level = BudgetLevel::PerLayer;
  auto dc = Compressor::create(dyn, cfg, m.rope(), 1);
  ASSERT_TRUE(dc.ok()) << dc.message();
  PagedSetup a = prefill(m, **dc, toks, 16, threads, nullptr, 0);
  ASSERT_TRUE((*dc)->compress(*a.cache, nullptr, 0, 0, threads).ok());
  // Fractions that reproduce each head's run-time length through budget_length.
  std::vector<float> f;
  for (int l = 0; l < cfg.n_layers; ++l)
    for (int h = 0; h < cfg.n_kv_head; ++h) {
      const int64_t len = a.cache->length(l, h);
      f.push_back((static_cast<float>(len - dyn.sink - dyn.window) - 0.5f) /
                  static_cast<float>(n - dyn.sink));
    }
  CompressionOptions tg = dyn;
  tg.policy = KvPolicy::Tangram;
  tg.alpha = 0;
  tg.ratio = 0.3;
  tg.budget_scaling = BudgetScaling::None;  // the fractions above, as they are
  tg.profile = write_profile(f, cfg.n_layers, cfg.n_kv_head, "coincide.json");
  auto tc = Compressor::create(tg, cfg, m.rope(), 1);
  ASSERT_TRUE(tc.ok()) << tc.message();
  PagedSetup b = prefill(m, **tc, toks, 16, threads, nullptr, 0);
  ASSERT_TRUE((*tc)->compress(*b.cache, nullptr, 0, 0, threads).ok());
  for (int l = 0; l < cfg.n_layers; ++l)
    for (int h = 0; h < cfg.n_kv_head; ++h) {
      ASSERT_EQ(a.cache->length(l, h), b.cache->length(l, h)) << l << "," << h;
      for (int64_t e = 0; e < a.cache->length(l, h); ++e)
        EXPECT_EQ(a.cache->entry_position(l, h, e), b.cache->entry_position(l, h, e));
    }
}

// Footprint scaling (the default): what tangram commits at the reference context, every member
// at its group's largest budget, is the ratio of full KV's, with the profile's map or a given
// one; heads keep their order; the over-retention is what the groups add to the own budgets.
TEST(Compressor, ScaledTangramCommitsTheRatioOfFullKv) {
  Model& m = testing::small_compress_model();
  const ModelConfig& cfg = m.config();
  const int L = cfg.n_layers, H = cfg.n_kv_head;
  const auto n_heads = static_cast<double>(L * H);
  std::vector<float> f;  // distinct budgets, not in head order
  for (int i = 0; i < L * H; ++i)
    f.push_back(0.02f + 0.05f * static_cast<float>((i * 5) % (L * H)));
  const std::string profile = write_profile(f, L, H, "scaled.json");
  auto per_layer = cluster_heads(f, L, H, 2, /*global=*/false);
  ASSERT_TRUE(per_layer.ok()) << per_layer.message();
  // Beside the profile: temp_dir() starts an empty folder each call.
  const std::string map_path =
      (std::filesystem::path(profile).parent_path() / "scaled-map.json").string();
  ASSERT_TRUE(save_cluster_map(*per_layer, map_path).ok());
  for (const int G : {1, 2, 4})
    for (const double ratio : {0.15, 0.3, 0.6})
      for (const bool given_map : {false, true}) {
        if (given_map && G != 2) continue;
        SCOPED_TRACE(fmt::format("G {} ratio {} map {}", G, ratio, given_map));
        CompressionOptions o;
        o.policy = KvPolicy::Tangram;
        o.ratio = ratio;
        o.sink = 4;
        o.window = 16;
        o.budget_context = 700;
        o.profile = profile;
        if (given_map) o.cluster_map = map_path;
        auto comp = Compressor::create(o, cfg, m.rope(), G);
        ASSERT_TRUE(comp.ok()) << comp.message();
        const auto len = (*comp)->target_lengths(700);
        int64_t kept = 0;
        for (int64_t x : len) kept += x;
        EXPECT_LE(std::abs(static_cast<double>(kept) - ratio * n_heads * 700), n_heads);
        const auto acct = (*comp)->retention_at(700);
        ASSERT_TRUE(acct.has_value());
        EXPECT_EQ(acct->kept, kept);
        EXPECT_EQ(acct->full, static_cast<int64_t>(n_heads) * 700);
        EXPECT_LE(acct->own, acct->kept);
        if (G == 4) {
          EXPECT_LT(acct->own, acct->kept);
        }
        if (G != 1) continue;
        EXPECT_EQ(acct->own, acct->kept);  // nobody shares: nothing over-retained
        // Ranks: a head of a larger profile budget never keeps less.
        for (int a = 0; a < L * H; ++a)
          for (int b = 0; b < L * H; ++b) {
            if (f[static_cast<size_t>(a)] < f[static_cast<size_t>(b)]) {
              EXPECT_LE(len[static_cast<size_t>(a)], len[static_cast<size_t>(b)]) << a << " " << b;
            }
          }
      }
}

// --kv-budget-scaling none keeps the profile's own form: each head at
// clip((mu + alpha·sigma) · ratio / base_ratio), its group at the largest.
TEST(Compressor, UnscaledTangramKeepsTheProfileForm) {
  Model& m = testing::small_compress_model();
  const ModelConfig& cfg = m.config();
  const int L = cfg.n_layers, H = cfg.n_kv_head;
  std::vector<float> f;
  for (int i = 0; i < L * H; ++i)
    f.push_back(0.03f + 0.07f * static_cast<float>((i * 3) % (L * H)));
  CompressionOptions o;
  o.policy = KvPolicy::Tangram;
  o.ratio = 0.2;
  o.alpha = 1.0;
  o.sink = 4;
  o.window = 16;
  o.budget_scaling = BudgetScaling::None;
  o.profile = write_profile(f, L, H, "unscaled.json");
  auto profile = load_profile(o.profile);
  ASSERT_TRUE(profile.ok()) << profile.message();
  const std::vector<float> b = budget_fractions(*profile, o.ratio, o.alpha);
  auto map = cluster_heads(f, L, H, 2, /*global=*/false);
  ASSERT_TRUE(map.ok());
  o.cluster_map = (std::filesystem::path(o.profile).parent_path() / "unscaled-map.json").string();
  ASSERT_TRUE(save_cluster_map(*map, o.cluster_map).ok());
  auto comp = Compressor::create(o, cfg, m.rope(), 2);
  ASSERT_TRUE(comp.ok()) << comp.message();
  for (const int64_t total : {100, 513, 1000}) {
    const auto len = (*comp)->target_lengths(total);
    for (const auto& group : map->members()) {
      float most = 0;
      for (int i : group) most = std::max(most, b[static_cast<size_t>(i)]);
      for (int i : group)
        EXPECT_EQ(len[static_cast<size_t>(i)], budget_length(most, total, 4, 16))
            << total << " " << i;
    }
  }
}

// Tangram's map: the profile clustered globally by default, per layer on request; a cluster-map
// file that groups across layers is served by default and refused under the per-layer scope.
TEST(Compressor, GroupScopeChoosesTheMapAndAGlobalMapFileNeedsTheGlobalScope) {
  Model& m = testing::small_compress_model();
  const ModelConfig& cfg = m.config();
  // 2 layers x 4 KV heads; budgets interleaved across layers so that global groups mix layers.
  const std::vector<float> f{0.1f, 0.5f, 0.2f, 0.6f, 0.5f, 0.1f, 0.6f, 0.2f};
  CompressionOptions o;
  o.policy = KvPolicy::Tangram;
  o.ratio = 0.3;
  // The profile's own budgets: footprint scaling would bring both maps to the same footprint.
  o.budget_scaling = BudgetScaling::None;
  o.profile = write_profile(f, cfg.n_layers, cfg.n_kv_head, "scope-profile.json");
  auto global = Compressor::create(o, cfg, m.rope(), 2);
  ASSERT_TRUE(global.ok()) << global.message();
  EXPECT_FALSE((*global)->group_map()->per_layer());
  o.per_layer_groups = true;
  auto per_layer = Compressor::create(o, cfg, m.rope(), 2);
  ASSERT_TRUE(per_layer.ok()) << per_layer.message();
  EXPECT_TRUE((*per_layer)->group_map()->per_layer());
  // Fewer retained tokens under the global map: its groups' members have closer budgets.
  EXPECT_LT((*global)->predicted_pages(400, 16), (*per_layer)->predicted_pages(400, 16));

  auto cm = cluster_heads(f, cfg.n_layers, cfg.n_kv_head, 2, true);
  ASSERT_TRUE(cm.ok()) << cm.message();
  o.cluster_map = (std::filesystem::path(o.profile).parent_path() / "scope-map.json").string();
  ASSERT_TRUE(save_cluster_map(*cm, o.cluster_map).ok());
  auto refused = Compressor::create(o, cfg, m.rope(), 2);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("--kv-group-scope is per-layer"), std::string::npos)
      << refused.message();
  o.per_layer_groups = false;
  auto from_file = Compressor::create(o, cfg, m.rope(), 2);
  ASSERT_TRUE(from_file.ok()) << from_file.message();
  EXPECT_FALSE((*from_file)->group_map()->per_layer());
}

TEST(Compressor, RefusesProfilesOfAnotherModelAndMissingQueries) {
  Model& m = testing::small_compress_model();
  const ModelConfig& cfg = m.config();
  CompressionOptions o;
  o.policy = KvPolicy::Tangram;
  o.ratio = 0.3;
  o.profile = write_profile(std::vector<float>(6, 0.2f), 3, 2, "wrong-shape.json");
  auto c = Compressor::create(o, cfg, m.rope(), 2);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("tangram profile"), std::string::npos) << c.message();
  o.profile = "/nonexistent/profile.json";
  EXPECT_FALSE(Compressor::create(o, cfg, m.rope(), 2).ok());
  CompressionOptions snap;
  snap.policy = KvPolicy::Uniform;
  snap.ratio = 0.5;
  snap.scorer.name = "snapkv";
  auto sc = Compressor::create(snap, cfg, m.rope(), 0);
  ASSERT_TRUE(sc.ok());
  ThreadPool threads(1);
  PagedSetup s = prefill(m, **sc, tokens(50, 1, cfg.vocab), 16, threads, nullptr, 0);
  EXPECT_FALSE((*sc)->compress(*s.cache, nullptr, 0, 0, threads).ok());
  EXPECT_EQ(s.cache->length(0, 0), 50);  // untouched
}

}  // namespace
}  // namespace tangram
