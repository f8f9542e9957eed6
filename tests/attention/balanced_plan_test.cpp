// The ahead-of-time balanced attention plan: run_attention with it against the double-precision
// reference over a mirror of the stored entries, exact coverage of every head's entries, the
// predicted balance against the naive one-item-per-group plan, and reuse over decode steps.
// Tolerance: the mirror holds exactly what the cache stores (F16 values already rounded), so the
// only differences are float vs double arithmetic, the vector exp and the exact merge of split
// heads: |out - ref| <= 1e-5 absolute for outputs of size ~1, for F32 and F16 storage alike.
#include "attention/balanced_plan.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "attention/paged_attention.h"
#include "kv/kv_test_util.h"
#include "kv/paged_kv_cache.h"

namespace tangram {
namespace {

using testing::KvMirror;
using testing::max_abs_diff;
using testing::random_values;

constexpr double kTol = 1e-5;
constexpr int kThreadCounts[] = {1, 2, 3, 4, 7};

// A head length drawn from a skewed distribution over [0, n]: about a tenth of the heads
// empty, a tenth with one entry, the rest log-normal around 20% of n with a long tail.
int64_t skewed_length(int64_t n, std::mt19937& rng) {
  const auto pick = static_cast<uint32_t>(rng() % 10);
  if (pick == 0) return 0;
  if (pick == 1) return std::min<int64_t>(1, n);
  std::lognormal_distribution<double> ratio(std::log(0.2), 1.0);
  return std::clamp<int64_t>(std::llround(std::min(1.0, ratio(rng)) * static_cast<double>(n)), 0,
                             n);
}

// One sequence: a one-layer paged cache and the mirror of what it stores.
struct Seq {
  std::unique_ptr<PagedKvCache> cache;
  std::unique_ptr<KvMirror> mirror;
  int64_t rows = 1;  // query rows per step (the last `rows` positions)
  std::vector<float> q, out;
};

class Fixture {
 public:
  Fixture(int page_tokens, int group, KvType type) : shape_{1, 16, 8, 32, 24}, type_(type) {
    PageGeometry g;
    g.page_tokens = page_tokens;
    g.group_size = group;
    g.head_dim = shape_.head_dim;
    g.head_dim_v = shape_.head_dim_v;
    g.type = type;
    pool_ = std::move(BlockPool::create(g, size_t{64} << 20).value());
    map_ = std::make_shared<const HeadGroupMap>(
        HeadGroupMap::contiguous(1, shape_.n_kv_head, group).value());
  }

  // n positions written, then every head cut to a skewed length.
  Seq make_seq(int64_t n, int64_t rows, std::mt19937& rng) {
    Seq s{std::move(PagedKvCache::create(shape_, 4096, *pool_, map_).value()),
          std::make_unique<KvMirror>(shape_, type_),
          rows,
          {},
          {}};
    append(s, n, rng);
    for (int h = 0; h < shape_.n_kv_head; ++h) {
      const int64_t len = skewed_length(n, rng);
      EXPECT_TRUE(s.cache->set_head_length(0, h, len).ok());
      s.mirror->set_length(0, h, len);
    }
    s.cache->release_unused_pages();
    return s;
  }

  void append(Seq& s, int64_t n, std::mt19937& rng) {
    ASSERT_TRUE(s.cache->reserve(s.cache->n_positions() + n).ok());
    const auto k = random_values(static_cast<size_t>(n * shape_.n_kv_head * shape_.head_dim), rng);
    const auto v =
        random_values(static_cast<size_t>(n * shape_.n_kv_head * shape_.head_dim_v), rng);
    ASSERT_TRUE(s.cache->write(0, s.mirror->positions(0), k.data(), v.data(), n).ok());
    s.mirror->write(0, k.data(), v.data(), n);
  }

  // Fresh queries for every sequence's last `rows` positions, and the batch over them.
  std::vector<AttentionItem> items(std::vector<Seq>& seqs, std::mt19937& rng) {
    std::vector<AttentionItem> items;
    for (Seq& s : seqs) {
      s.q = random_values(static_cast<size_t>(s.rows * shape_.n_head * shape_.head_dim), rng, 2.0f);
      s.out.assign(static_cast<size_t>(s.rows * shape_.n_head * shape_.head_dim_v), -7.0f);
      items.push_back(
          {s.cache.get(), s.q.data(), s.out.data(), s.rows, s.cache->n_positions() - s.rows});
    }
    return items;
  }

  BlockPool& pool() { return *pool_; }

 private:
  KvShape shape_;
  KvType type_;
  std::unique_ptr<BlockPool> pool_;
  std::shared_ptr<const HeadGroupMap> map_;
};

using Param = std::tuple<int, int, KvType>;  // page tokens, group size, type

class BalancedPlanSweep : public ::testing::TestWithParam<Param> {};

TEST_P(BalancedPlanSweep, MatchesReferenceAndStaysCorrectWhileHeadsGrow) {
  const auto [page_tokens, group, type] = GetParam();
  Fixture fx(page_tokens, group, type);
  std::mt19937 rng(static_cast<uint32_t>(page_tokens * 100 + group * 10 + (type == KvType::F16)));
  std::vector<std::unique_ptr<ThreadPool>> pools;
  for (const int t : kThreadCounts) pools.push_back(std::make_unique<ThreadPool>(t));
  size_t merges = 0;
  for (const int n_seqs : {1, 3, 8}) {
    std::vector<Seq> seqs;
    std::uniform_int_distribution<int64_t> positions(1, 500);
    for (int i = 0; i < n_seqs; ++i) {
      // The second sequence runs a 3-row prefill chunk; the others decode.
      const int64_t rows = i == 1 ? 3 : 1;
      seqs.push_back(fx.make_seq(std::max(rows, positions(rng)), rows, rng));
    }
    // One plan per thread count, made once and reused over the decode steps that follow.
    std::vector<AttentionPlan> plans(pools.size());
    for (int step = 0; step < 3; ++step) {
      if (step > 0)
        for (Seq& s : seqs) fx.append(s, 1, rng);  // every head grows by one entry
      const auto items = fx.items(seqs, rng);
      std::vector<std::vector<double>> want;
      for (size_t i = 0; i < seqs.size(); ++i)
        want.push_back(seqs[i].mirror->attend(0, items[i].q, items[i].n, items[i].pos0));
      AttentionWorkspace ws;
      ASSERT_TRUE(build_attention_batch(0, items, ws.batch).ok());
      for (size_t p = 0; p < pools.size(); ++p) {
        ThreadPool& pool = *pools[p];
        const std::string what =
            fmt::format("{} sequences, {} threads, step {}", n_seqs, pool.size(), step);
        if (step == 0) {
          plan_attention_balanced(ws.batch, pool.size(), plans[p]);
          merges += plans[p].merges.size();
        }
        ASSERT_EQ(plans[p].thread_begin.size(), static_cast<size_t>(pool.size()) + 1) << what;
        const Status covered = check_attention_coverage(ws.batch, plans[p]);
        ASSERT_TRUE(covered.ok()) << what << ": " << covered.message();
        for (Seq& s : seqs) std::fill(s.out.begin(), s.out.end(), -7.0f);
        ASSERT_TRUE(run_attention(ws.batch, plans[p], pool, ws).ok()) << what;
        for (size_t i = 0; i < seqs.size(); ++i)
          EXPECT_LE(max_abs_diff(want[i], seqs[i].out), kTol) << what << ", sequence " << i;
      }
      // The naive plan on the same batch, for comparison (dynamic order).
      plan_attention_naive(ws.batch, 3, ws.plan);
      ASSERT_TRUE(check_attention_coverage(ws.batch, ws.plan).ok());
      ASSERT_TRUE(run_attention(ws.batch, ws.plan, *pools[2], ws).ok());
      for (size_t i = 0; i < seqs.size(); ++i)
        EXPECT_LE(max_abs_diff(want[i], seqs[i].out), kTol) << "naive plan, sequence " << i;
    }
  }
  EXPECT_GT(merges, 0u);  // some heads were split and merged
  EXPECT_TRUE(fx.pool().check_consistency().ok());
}

INSTANTIATE_TEST_SUITE_P(PagesGroupsTypes, BalancedPlanSweep,
                         ::testing::Combine(::testing::Values(1, 16, 64),
                                            ::testing::Values(1, 2, 4, 8),
                                            ::testing::Values(KvType::F32, KvType::F16)),
                         [](const ::testing::TestParamInfo<Param>& p) {
                           return fmt::format("P{}_G{}_{}", std::get<0>(p.param),
                                              std::get<1>(p.param),
                                              kv_type_name(std::get<2>(p.param)));
                         });

// ---- planning alone, on batches that hold only head lengths (no KV data is read) ----

// Decode batch: one query row per sequence at position context - 1, KV head h of sequence s
// holding lengths[s][h] entries (all visible), groups of `group` consecutive heads.
AttentionBatch length_batch(const std::vector<std::vector<int64_t>>& lengths, int group,
                            int q_per_kv = 2) {
  AttentionBatch b;
  const int n_kv = static_cast<int>(lengths.front().size());
  b.n_head = n_kv * q_per_kv;
  b.n_kv_head = n_kv;
  b.head_dim = b.head_dim_v = 128;
  for (const auto& seq : lengths) {
    const int64_t longest = *std::max_element(seq.begin(), seq.end());
    b.seqs.push_back({nullptr, nullptr, 1, std::max<int64_t>(longest, 1) - 1});
    for (int h = 0; h < n_kv; ++h) {
      KvHeadView v;
      v.length = seq[static_cast<size_t>(h)];
      b.heads.push_back(v);
      b.head_order.push_back(h);
      b.group_start.push_back(h % group == 0 ? 1 : 0);
    }
  }
  return b;
}

// Per-head lengths of up to 32k-entry contexts: log-normal around 12% with a long tail, a
// tenth of the heads empty or with one entry.
std::vector<std::vector<int64_t>> skewed_lengths(int n_seqs, std::mt19937& rng) {
  std::vector<std::vector<int64_t>> lengths(static_cast<size_t>(n_seqs));
  std::uniform_int_distribution<int64_t> context(8192, 32768);
  for (auto& seq : lengths) {
    const int64_t n = context(rng);
    for (int h = 0; h < 8; ++h) {
      std::lognormal_distribution<double> ratio(std::log(0.12), 1.2);
      const auto pick = static_cast<uint32_t>(rng() % 10);
      seq.push_back(pick == 0   ? 0
                    : pick == 1 ? 1
                                : std::llround(std::min(1.0, ratio(rng)) * static_cast<double>(n)));
    }
  }
  return lengths;
}

TEST(BalancedPlan, BalancesWhereTheNaivePlanStraggles) {
  // Constructed skew: one group (or head) of the naive plan alone exceeds 1.3 shares.
  struct Case {
    std::vector<std::vector<int64_t>> lengths;
    std::vector<int> groups;
  };
  const std::vector<Case> cases = {
      {{{8000, 8000, 8000, 8000, 8000, 8000, 8000, 8000}, {100, 90, 80, 0, 1, 60, 50, 40}}, {8}},
      {{{30000, 100, 100, 100, 100, 100, 100, 100}}, {1, 2, 4, 8}},
      {{{20000, 20000, 5, 5, 5, 5, 5, 5},
        {300, 300, 300, 300, 0, 0, 0, 0},
        {1, 1, 1, 1, 1, 1, 1, 1}},
       {2, 4, 8}},
  };
  for (size_t c = 0; c < cases.size(); ++c)
    for (const int group : cases[c].groups)
      for (const int threads : {2, 3, 4, 7}) {
        const AttentionBatch batch = length_batch(cases[c].lengths, group);
        AttentionPlan naive, balanced;
        plan_attention_naive(batch, threads, naive);
        plan_attention_balanced(batch, threads, balanced);
        const std::string what = fmt::format("case {}, G {}, {} threads", c, group, threads);
        ASSERT_TRUE(check_attention_coverage(batch, balanced).ok()) << what;
        EXPECT_GE(plan_imbalance(batch, naive, threads), 1.3) << what;
        EXPECT_LE(plan_imbalance(batch, balanced, threads), 1.05) << what;
        EXPECT_LE(balanced.merges.size(), static_cast<size_t>(threads - 1)) << what;
      }
}

TEST(BalancedPlan, RandomSkewedBatchesStayWithinFivePercent) {
  // A boundary misses its ideal place by at most half a kernel block of its tile's lanes plus
  // an item overhead (the grain), or by the edge slack (1% of a share) when it snaps to a tile
  // edge; a thread has two boundaries. So the imbalance is at most 1 + 2 max(grain, 1% share)
  // / share, which is <= 1.05 once a share holds >= 40 grains (each thread has ~640 entries of
  // one 8-head group or more). Smaller shares are held to the general bound.
  std::mt19937 rng(31);
  const int gq = 4;
  int naive_straggles = 0, cases = 0, large = 0;
  for (int round = 0; round < 40; ++round) {
    const int n_seqs = 1 + round % 8;
    const auto lengths = skewed_lengths(n_seqs, rng);
    for (const int group : {1, 4, 8})
      for (const int threads : {1, 2, 3, 4, 7}) {
        const AttentionBatch batch = length_batch(lengths, group, gq);
        AttentionPlan naive, balanced;
        plan_attention_naive(batch, threads, naive);
        plan_attention_balanced(batch, threads, balanced);
        const std::string what =
            fmt::format("round {}, {} sequences, G {}, {} threads", round, n_seqs, group, threads);
        ASSERT_TRUE(check_attention_coverage(batch, balanced).ok()) << what;
        ASSERT_TRUE(check_attention_coverage(batch, naive).ok()) << what;
        double total = 0.0;
        for (const AttentionWork& w : balanced.work)
          total += static_cast<double>(predicted_work_cost(batch, w));
        const double share = total / threads;
        const double grain =
            16.0 * group * gq + static_cast<double>(BalancedPlanOptions{}.item_overhead);
        const double b = plan_imbalance(batch, balanced, threads);
        EXPECT_GE(b, 1.0 - 1e-12) << what;
        EXPECT_LE(b, 1.0 + 2.0 * std::max(grain, 0.01 * share) / share + 1e-9) << what;
        if (share >= 40.0 * grain) {
          EXPECT_LE(b, 1.05) << what;
          ++large;
        }
        if (threads == 1) {
          EXPECT_EQ(balanced.merges.size(), 0u) << what;
        }
        naive_straggles += plan_imbalance(batch, naive, threads) >= 1.3;
        ++cases;
      }
  }
  // Most cases are large enough for the 5% claim, and skewed enough that the naive plan
  // straggles in many.
  EXPECT_GE(large, cases * 3 / 4) << large << " of " << cases;
  EXPECT_GE(naive_straggles, cases / 4) << naive_straggles << " of " << cases;
}

TEST(BalancedPlan, ReusedPlanCoversGrowingHeadsAndDriftsSlowly) {
  std::mt19937 rng(32);
  auto lengths = skewed_lengths(4, rng);
  const AttentionBatch start = length_batch(lengths, 2, 4);
  AttentionPlan plan;
  plan_attention_balanced(start, 4, plan);
  const double first = plan_imbalance(start, plan, 4);
  for (int step = 1; step <= 64; ++step) {
    for (auto& seq : lengths)
      for (auto& len : seq) ++len;  // a decode step: one entry more per head
    const AttentionBatch batch = length_batch(lengths, 2, 4);
    ASSERT_TRUE(check_attention_coverage(batch, plan).ok()) << "step " << step;
    if (step == 64) {
      EXPECT_LE(plan_imbalance(batch, plan, 4), first + 0.05);
    }
  }
}

TEST(BalancedPlan, CoverageCheckCatchesGapsAndOverlaps) {
  const AttentionBatch batch = length_batch({{500, 40, 0, 7}}, 2);
  AttentionPlan plan;
  plan_attention_balanced(batch, 3, plan);
  ASSERT_TRUE(check_attention_coverage(batch, plan).ok());
  ASSERT_GT(plan.merges.size(), 0u);
  // Find a split item and shift its start: entries are then missed or covered twice.
  auto split = std::find_if(plan.work.begin(), plan.work.end(),
                            [](const AttentionWork& w) { return w.entry_begin > 0; });
  ASSERT_NE(split, plan.work.end());
  AttentionPlan gap = plan;
  gap.work[static_cast<size_t>(split - plan.work.begin())].entry_begin += 32;
  EXPECT_FALSE(check_attention_coverage(batch, gap).ok());
  AttentionPlan overlap = plan;
  overlap.work[static_cast<size_t>(split - plan.work.begin())].entry_begin -= 32;
  EXPECT_FALSE(check_attention_coverage(batch, overlap).ok());
  AttentionPlan missing = plan;  // an unsplit item dropped: its heads are in no item
  missing.work.erase(std::find_if(missing.work.begin(), missing.work.end(),
                                  [](const AttentionWork& w) { return w.merge < 0; }));
  missing.thread_begin.clear();
  EXPECT_FALSE(check_attention_coverage(batch, missing).ok());
}

TEST(BalancedPlan, ImbalanceOfFixedAndDynamicOrders) {
  // Two groups of 2 heads: costs 2 x 2 x 1000 and 2 x 2 x 100 lanes x entries (+ overheads).
  const AttentionBatch batch = length_batch({{1000, 1000, 100, 100}}, 2);
  AttentionPlan plan;
  plan_attention_naive(batch, 2, plan);
  ASSERT_EQ(plan.work.size(), 2u);
  const double big = 4000 + 256, small = 400 + 256;
  EXPECT_NEAR(plan_imbalance(batch, plan, 2), big / ((big + small) / 2), 1e-12);
  EXPECT_NEAR(plan_imbalance(batch, plan, 1), 1.0, 1e-12);
  plan.thread_begin = {0, 0, 2};  // both on thread 1
  EXPECT_NEAR(plan_imbalance(batch, plan, 2), 2.0, 1e-12);
  EXPECT_EQ(predicted_work_cost(batch, plan.work[0], 0), 4000);
}

TEST(BalancedPlan, EmptyHeadsStillGetAnItem) {
  const AttentionBatch batch = length_batch({{0, 0, 0, 0}, {0, 1, 0, 0}}, 2);
  for (const int threads : {1, 2, 7}) {
    AttentionPlan plan;
    plan_attention_balanced(batch, threads, plan);
    EXPECT_TRUE(check_attention_coverage(batch, plan).ok());
    EXPECT_EQ(plan.work.size(), 4u);
    EXPECT_EQ(plan.thread_begin.size(), static_cast<size_t>(threads) + 1);
  }
}

}  // namespace
}  // namespace tangram
