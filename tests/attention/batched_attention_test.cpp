// BatchedAttention (the attention of one forward step over many sequences) against the plain
// double-precision reference over a mirror of each cache, on the same inputs: paged caches
// under every split (one planned call per layer), contiguous and mixed caches (the same planned
// call, through their dense head views), ahead-of-time plans reused while heads grow; then the
// planner's bookkeeping (when plans are re-made, which plans are scored). Tolerance as in
// paged_attention_test.cpp: the mirror holds exactly what the caches store, so only float vs double
// arithmetic differs.
#include "attention/batched_attention.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kv/contiguous_kv_cache.h"
#include "kv/kv_test_util.h"
#include "kv/paged_kv_cache.h"

namespace tangram {
namespace {

using testing::KvMirror;
using testing::max_abs_diff;
using testing::random_values;

constexpr double kTol = 2e-5;
const KvShape kShape{2, 8, 4, 32, 32};  // layers, query heads, KV heads, head dims (GQA 2)

// A sequence under test: its cache, the mirror of what the cache holds, and the query rows it
// runs in the step.
struct Seq {
  std::unique_ptr<KvCache> cache;
  KvMirror mirror{kShape, KvType::F32};
  int64_t rows = 1;
};

class BatchedAttentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PageGeometry g;
    g.page_tokens = 16;
    g.group_size = 2;
    g.head_dim = kShape.head_dim;
    g.head_dim_v = kShape.head_dim_v;
    g.type = type_;
    pool_ = std::move(BlockPool::create(g, size_t{16} << 20).value());
    map_ = std::make_shared<const HeadGroupMap>(
        HeadGroupMap::contiguous(kShape.n_layers, kShape.n_kv_head, g.group_size).value());
  }

  Seq paged_seq(int64_t length, int64_t rows) {
    Seq s{std::move(PagedKvCache::create(kShape, 4096, *pool_, map_).value()),
          KvMirror(kShape, type_), rows};
    append(s, length);
    return s;
  }
  Seq contiguous_seq(int64_t length, int64_t rows) {
    Seq s{std::make_unique<ContiguousKvCache>(kShape, 4096, type_), KvMirror(kShape, type_), rows};
    append(s, length);
    return s;
  }
  void append(Seq& s, int64_t n) {
    ASSERT_TRUE(s.cache->reserve(s.cache->n_positions() + n).ok());
    for (int l = 0; l < kShape.n_layers; ++l) {
      const auto k =
          random_values(static_cast<size_t>(n * kShape.n_kv_head * kShape.head_dim), rng_);
      const auto v =
          random_values(static_cast<size_t>(n * kShape.n_kv_head * kShape.head_dim_v), rng_);
      ASSERT_TRUE(s.cache->write(l, s.mirror.positions(l), k.data(), v.data(), n).ok());
      s.mirror.write(l, k.data(), v.data(), n);
    }
  }
  // Gives every head of a paged sequence its own length (every third entry dropped, from a
  // head-dependent offset), as per-head compression leaves them.
  void compact(Seq& s) {
    auto& cache = static_cast<PagedKvCache&>(*s.cache);
    for (int l = 0; l < kShape.n_layers; ++l)
      for (int h = 0; h < kShape.n_kv_head; ++h) {
        std::vector<int64_t> keep;
        for (int64_t e = 0; e < cache.length(l, h); ++e)
          if ((e + h + l) % 3 != 0) keep.push_back(e);
        ASSERT_TRUE(cache.compact_head(l, h, keep).ok());
        s.mirror.compact(l, h, keep);
      }
    cache.release_unused_pages();
  }

  // One step: fresh queries for every sequence's last `rows` positions, every layer run through
  // `attention`, each sequence's rows compared with the reference.
  void check_step(BatchedAttention& attention, std::vector<Seq>& seqs, ThreadPool& pool,
                  const std::string& what) {
    std::vector<AttentionQuery> queries;
    int64_t total = 0;
    for (const Seq& s : seqs) {
      queries.push_back({s.cache.get(), s.rows, s.cache->n_positions() - s.rows});
      total += s.rows;
    }
    ASSERT_TRUE(attention.begin_step(queries, kShape.n_layers).ok()) << what;
    const int64_t q_row = int64_t{kShape.n_head} * kShape.head_dim;
    const int64_t out_row = int64_t{kShape.n_head} * kShape.head_dim_v;
    for (int l = 0; l < kShape.n_layers; ++l) {
      const auto q = random_values(static_cast<size_t>(total * q_row), rng_, 2.0f);
      std::vector<float> out(static_cast<size_t>(total * out_row), -7.0f);
      ASSERT_TRUE(attention.attend(l, q.data(), out.data(), pool).ok()) << what;
      int64_t r = 0;
      for (size_t i = 0; i < seqs.size(); ++i) {
        const Seq& s = seqs[i];
        const auto want = s.mirror.attend(l, q.data() + r * q_row, s.rows, queries[i].pos0);
        const std::vector<float> got(out.begin() + r * out_row,
                                     out.begin() + (r + s.rows) * out_row);
        EXPECT_LE(max_abs_diff(want, got), kTol) << what << ", layer " << l << ", sequence " << i;
        r += s.rows;
      }
    }
  }

  KvType type_ = KvType::F16;
  std::mt19937 rng_{14};
  std::unique_ptr<BlockPool> pool_;
  std::shared_ptr<const HeadGroupMap> map_;
};

const char* split_name(AttentionSplit split) {
  switch (split) {
    case AttentionSplit::Runtime:
      return "runtime";
    case AttentionSplit::Naive:
      return "naive";
    case AttentionSplit::AheadOfTime:
      return "ahead-of-time";
  }
  return "?";
}

TEST_F(BatchedAttentionTest, PagedStepMatchesReferenceUnderEverySplit) {
  for (const AttentionSplit split :
       {AttentionSplit::Runtime, AttentionSplit::Naive, AttentionSplit::AheadOfTime}) {
    for (const int threads : {1, 3}) {
      // Decode rows and a prefill chunk together, heads of unequal lengths.
      std::vector<Seq> seqs;
      seqs.push_back(paged_seq(300, 1));
      seqs.push_back(paged_seq(40, 5));
      seqs.push_back(paged_seq(700, 1));
      compact(seqs[2]);
      ThreadPool pool(threads);
      BatchedAttention attention;
      attention.planner().set_split(split);
      const std::string what =
          std::string(split_name(split)) + ", " + std::to_string(threads) + " threads";
      // Three steps of the same structure: ahead-of-time plans are made once and reused while
      // every head grows by the step's rows.
      for (int step = 0; step < 3; ++step) {
        if (step > 0)
          for (Seq& s : seqs) append(s, s.rows);
        check_step(attention, seqs, pool, what + ", step " + std::to_string(step));
      }
      const int64_t want_plans = split == AttentionSplit::AheadOfTime ? kShape.n_layers : 0;
      EXPECT_EQ(attention.planner().plans_made(), want_plans) << what;
    }
  }
}

TEST_F(BatchedAttentionTest, ContiguousAndMixedCachesArePlannedTooAndMatchReference) {
  ThreadPool pool(2);
  std::vector<Seq> contiguous;
  contiguous.push_back(contiguous_seq(120, 1));
  contiguous.push_back(contiguous_seq(33, 4));
  BatchedAttention attention;
  attention.planner().set_split(AttentionSplit::AheadOfTime);
  check_step(attention, contiguous, pool, "contiguous");

  std::vector<Seq> mixed;
  mixed.push_back(paged_seq(90, 1));
  mixed.push_back(contiguous_seq(60, 1));
  check_step(attention, mixed, pool, "mixed");
  EXPECT_GT(attention.planner().plans_made(), 0) << "every layout goes through the planned call";
}

TEST_F(BatchedAttentionTest, AheadOfTimePlansAreRemadeWhenTheStepChangesOrAges) {
  ThreadPool pool(2);
  std::vector<Seq> seqs;
  seqs.push_back(paged_seq(50, 1));
  seqs.push_back(paged_seq(80, 1));
  BatchedAttention attention;
  attention.planner().set_split(AttentionSplit::AheadOfTime);
  const int64_t per_step = kShape.n_layers;
  check_step(attention, seqs, pool, "first step");
  EXPECT_EQ(attention.planner().plans_made(), per_step);
  check_step(attention, seqs, pool, "same structure");
  EXPECT_EQ(attention.planner().plans_made(), per_step);

  seqs[1].rows = 2;  // a sequence changes its row count
  check_step(attention, seqs, pool, "rows changed");
  EXPECT_EQ(attention.planner().plans_made(), 2 * per_step);
  seqs.push_back(paged_seq(20, 1));  // a sequence joins
  check_step(attention, seqs, pool, "sequence joined");
  EXPECT_EQ(attention.planner().plans_made(), 3 * per_step);

  // Unchanged structure: re-planned once kReplanSteps steps have passed.
  for (int64_t i = 1; i < AttentionPlanner::kReplanSteps; ++i)
    check_step(attention, seqs, pool, "aging " + std::to_string(i));
  EXPECT_EQ(attention.planner().plans_made(), 3 * per_step);
  check_step(attention, seqs, pool, "aged");
  EXPECT_EQ(attention.planner().plans_made(), 4 * per_step);
}

TEST_F(BatchedAttentionTest, OnlyDecodePlansAreScoredForImbalance) {
  ThreadPool pool(3);
  BatchedAttention attention;
  attention.planner().set_split(AttentionSplit::Naive);
  std::vector<Seq> prefill;
  prefill.push_back(paged_seq(500, 4));
  prefill.push_back(paged_seq(20, 4));
  check_step(attention, prefill, pool, "prefill");
  EXPECT_EQ(attention.planner().imbalance(), 1.0) << "prefill plans are not scored";

  // Naive split, one long and two short sequences on three threads: the long sequence's two
  // head groups hold two threads while the third runs every short item.
  std::vector<Seq> decode;
  decode.push_back(paged_seq(2000, 1));
  decode.push_back(paged_seq(20, 1));
  decode.push_back(paged_seq(20, 1));
  check_step(attention, decode, pool, "decode");
  EXPECT_GT(attention.planner().imbalance(), 1.2);
  attention.planner().reset_stats();
  EXPECT_EQ(attention.planner().imbalance(), 1.0);
}

TEST_F(BatchedAttentionTest, RefusesStepsWithoutSequencesOrCaches) {
  ThreadPool pool(1);
  BatchedAttention attention;
  std::vector<float> q(static_cast<size_t>(kShape.n_head * kShape.head_dim));
  std::vector<float> out(static_cast<size_t>(kShape.n_head * kShape.head_dim_v));
  EXPECT_FALSE(attention.attend(0, q.data(), out.data(), pool).ok()) << "attend before begin_step";
  EXPECT_FALSE(attention.begin_step({}, kShape.n_layers).ok());
  const AttentionQuery no_cache{nullptr, 1, 0};
  EXPECT_FALSE(attention.begin_step(std::span(&no_cache, 1), kShape.n_layers).ok());
}

}  // namespace
}  // namespace tangram
