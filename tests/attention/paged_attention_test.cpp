// Paged attention against a plain double-precision attention over a mirror of the stored
// entries. Tolerances: the mirror holds exactly what the cache stores (F16 values already
// rounded), so the only differences are float vs double arithmetic and the vector exp:
// |out - ref| <= 2e-5 absolute for outputs of size ~1. Against unrounded inputs, F16 storage
// adds up to ~1e-3 (checked separately with 1e-2). Q8_0 pages are checked the same way: the
// mirror holds the dequantised rows and rounds the query as the integer-dot loops do
// (kv_test_util.h), so this is quantized attention against dequantise-then-attend, within
// 2e-5 plus the bound of the value weights' rounding (KvMirror::weight_rounding_bound).
#include "attention/paged_attention.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "attention/dense_attention.h"
#include "kv/contiguous_kv_cache.h"
#include "kv/kv_test_util.h"
#include "kv/paged_kv_cache.h"

namespace tangram {
namespace {

using testing::attend_cache;
using testing::KvMirror;
using testing::max_abs_diff;
using testing::max_excess;
using testing::random_values;

constexpr double kTol = 2e-5;

struct Env {
  KvShape shape;
  KvType type;
  std::unique_ptr<BlockPool> pool;
  std::shared_ptr<const HeadGroupMap> map;

  Env(const KvShape& s, int page_tokens, int group, KvType t,
      std::shared_ptr<const HeadGroupMap> custom = nullptr)
      : shape(s), type(t) {
    PageGeometry g;
    g.page_tokens = page_tokens;
    g.group_size = group;
    g.head_dim = s.head_dim;
    g.head_dim_v = s.head_dim_v;
    g.type = t;
    pool = std::move(BlockPool::create(g, size_t{32} << 20).value());
    map = custom ? std::move(custom)
                 : std::make_shared<const HeadGroupMap>(
                       HeadGroupMap::contiguous(s.n_layers, s.n_kv_head, group).value());
  }
  std::unique_ptr<PagedKvCache> cache() {
    return std::move(PagedKvCache::create(shape, 4096, *pool, map).value());
  }
};

// A sequence under test: the cache and its mirror.
struct Seq {
  std::unique_ptr<PagedKvCache> cache;
  std::unique_ptr<KvMirror> mirror;
};

Seq make_seq(Env& env) { return {env.cache(), std::make_unique<KvMirror>(env.shape, env.type)}; }

void append(Seq& s, int64_t n, std::mt19937& rng) {
  const KvShape& sh = s.cache->shape();
  ASSERT_TRUE(s.cache->reserve(s.cache->n_positions() + n).ok());
  for (int l = 0; l < sh.n_layers; ++l) {
    const auto k = random_values(static_cast<size_t>(n * sh.n_kv_head * sh.head_dim), rng);
    const auto v = random_values(static_cast<size_t>(n * sh.n_kv_head * sh.head_dim_v), rng);
    ASSERT_TRUE(s.cache->write(l, s.mirror->positions(l), k.data(), v.data(), n).ok());
    s.mirror->write(l, k.data(), v.data(), n);
  }
}

// Gives every head its own length: a random subset kept (sometimes none, sometimes all).
void compact_randomly(Seq& s, std::mt19937& rng) {
  const KvShape& sh = s.cache->shape();
  for (int l = 0; l < sh.n_layers; ++l)
    for (int h = 0; h < sh.n_kv_head; ++h) {
      const int64_t len = s.cache->length(l, h);
      const int mode = static_cast<int>(rng() % 6);
      std::vector<int64_t> keep;
      if (mode == 0) {
        // keep nothing
      } else if (mode == 1) {
        for (int64_t e = 0; e < len; ++e) keep.push_back(e);
      } else {
        const double p = 0.15 * mode;
        std::bernoulli_distribution coin(p);
        for (int64_t e = 0; e < len; ++e)
          if (coin(rng)) keep.push_back(e);
      }
      ASSERT_TRUE(s.cache->compact_head(l, h, keep).ok());
      s.mirror->compact(l, h, keep);
    }
  s.cache->release_unused_pages();
}

// Attention of the cache's last n positions of layer `layer` through KvCache::attend and through
// the batched entry with a plan forced to split heads, both against the reference.
void check_attend(Seq& s, int layer, int64_t n, std::mt19937& rng, ThreadPool& pool,
                  const std::string& what) {
  const KvShape& sh = s.cache->shape();
  const int64_t pos0 = s.cache->n_positions() - n;
  const auto q = random_values(static_cast<size_t>(n * sh.n_head * sh.head_dim), rng, 2.0f);
  const auto want = s.mirror->attend(layer, q.data(), n, pos0);
  const auto bound = s.mirror->weight_rounding_bound(layer, q.data(), n, pos0);
  std::vector<float> got(want.size(), -7.0f);
  attend_cache(*s.cache, layer, q.data(), n, pos0, got.data(), pool);
  EXPECT_LE(max_excess(want, got, bound), kTol) << what << " (attend)";

  AttentionWorkspace ws;
  const AttentionItem item{s.cache.get(), q.data(), got.data(), n, pos0};
  ASSERT_TRUE(build_attention_batch(layer, std::span(&item, 1), ws.batch).ok());
  AttentionPlanOptions split;
  split.min_chunk_entries = 32;
  split.items_per_thread = 64;
  for (const bool whole_groups : {true, false}) {
    split.whole_groups = whole_groups;
    plan_attention(ws.batch, 4, ws.plan, split);
    std::fill(got.begin(), got.end(), -7.0f);
    ASSERT_TRUE(run_attention(ws.batch, ws.plan, pool, ws).ok());
    EXPECT_LE(max_excess(want, got, bound), kTol)
        << what << " (split plan, " << (whole_groups ? "group" : "head") << " items, "
        << ws.plan.merges.size() << " merges)";
  }
}

using Param = std::tuple<int, int, KvType>;  // page tokens, group size, type

class PagedAttentionSweep : public ::testing::TestWithParam<Param> {};

TEST_P(PagedAttentionSweep, MatchesReferenceThroughPrefillCompactionAndDecode) {
  const auto [page_tokens, group, type] = GetParam();
  // 8 KV heads, 2 query heads each; value size differs from key size (Q8_0: both multiples
  // of its 32-element blocks, so a row of two blocks and a row of one).
  const KvShape shape =
      type == KvType::Q8_0 ? KvShape{2, 16, 8, 64, 32} : KvShape{2, 16, 8, 32, 24};
  Env env(shape, page_tokens, group, type);
  ThreadPool pool(3);
  std::mt19937 rng(static_cast<uint32_t>(page_tokens * 100 + group * 10 + (type == KvType::F16)));
  Seq s = make_seq(env);

  append(s, 70, rng);  // prefill chunk 1: causal within the chunk
  for (int l = 0; l < 2; ++l) check_attend(s, l, 70, rng, pool, "prefill 1");
  compact_randomly(s, rng);  // heads of different lengths
  append(s, 45, rng);        // prefill chunk 2 over compacted heads
  for (int l = 0; l < 2; ++l) check_attend(s, l, 45, rng, pool, "prefill 2");
  ASSERT_TRUE(s.cache->set_head_length(1, 3, s.cache->length(1, 3) / 2).ok());
  s.mirror->set_length(1, 3, s.cache->length(1, 3));
  for (int step = 0; step < 4; ++step) {  // decode
    append(s, 1, rng);
    for (int l = 0; l < 2; ++l) check_attend(s, l, 1, rng, pool, "decode");
  }
  EXPECT_TRUE(env.pool->check_consistency().ok());
}

INSTANTIATE_TEST_SUITE_P(PagesGroupsTypes, PagedAttentionSweep,
                         ::testing::Combine(::testing::Values(1, 5, 16, 32, 48, 64, 96, 128),
                                            ::testing::Values(1, 2, 4, 8),
                                            ::testing::Values(KvType::F32, KvType::F16,
                                                              KvType::Q8_0)),
                         [](const ::testing::TestParamInfo<Param>& p) {
                           return fmt::format("P{}_G{}_{}", std::get<0>(p.param),
                                              std::get<1>(p.param),
                                              kv_type_name(std::get<2>(p.param)));
                         });

// Heads of every layer shuffled and cut into groups of G (the last may be shorter): groups mix
// layers, as the global clustering makes them.
std::shared_ptr<const HeadGroupMap> shuffled_cross_layer_map(const KvShape& s, int group,
                                                             uint32_t seed) {
  std::vector<int> heads(static_cast<size_t>(s.n_layers * s.n_kv_head));
  for (size_t i = 0; i < heads.size(); ++i) heads[i] = static_cast<int>(i);
  std::mt19937 rng(seed);
  std::shuffle(heads.begin(), heads.end(), rng);
  std::vector<std::vector<int>> groups;
  for (size_t i = 0; i < heads.size(); i += static_cast<size_t>(group))
    groups.emplace_back(heads.begin() + static_cast<std::ptrdiff_t>(i),
                        heads.begin() + static_cast<std::ptrdiff_t>(std::min(
                                            heads.size(), i + static_cast<size_t>(group))));
  return std::make_shared<const HeadGroupMap>(
      HeadGroupMap::from_flat_groups(s.n_layers, s.n_kv_head, group, groups).value());
}

// One forward step as the engine runs it: reserve once, then each layer writes and attends
// before the next layer writes (groups spanning layers are mid-step in between).
void step_layer_by_layer(Seq& s, int64_t n, std::mt19937& rng, ThreadPool& pool,
                         const std::string& what) {
  const KvShape& sh = s.cache->shape();
  ASSERT_TRUE(s.cache->reserve(s.cache->n_positions() + n).ok());
  for (int l = 0; l < sh.n_layers; ++l) {
    const auto k = random_values(static_cast<size_t>(n * sh.n_kv_head * sh.head_dim), rng);
    const auto v = random_values(static_cast<size_t>(n * sh.n_kv_head * sh.head_dim_v), rng);
    const int64_t pos0 = s.mirror->positions(l);
    ASSERT_TRUE(s.cache->write(l, pos0, k.data(), v.data(), n).ok()) << what << " layer " << l;
    s.mirror->write(l, k.data(), v.data(), n);
    const auto q = random_values(static_cast<size_t>(n * sh.n_head * sh.head_dim), rng, 2.0f);
    const auto want = s.mirror->attend(l, q.data(), n, pos0);
    std::vector<float> got(want.size(), -7.0f);
    attend_cache(*s.cache, l, q.data(), n, pos0, got.data(), pool);
    EXPECT_LE(max_excess(want, got, s.mirror->weight_rounding_bound(l, q.data(), n, pos0)), kTol)
        << what << " layer " << l;
  }
}

class CrossLayerAttentionSweep : public ::testing::TestWithParam<Param> {};

TEST_P(CrossLayerAttentionSweep, MatchesReferenceThroughPrefillCompressionDecodeAndSecondTurn) {
  const auto [page_tokens, group, type] = GetParam();
  const KvShape shape =
      type == KvType::Q8_0 ? KvShape{3, 12, 6, 32, 64} : KvShape{3, 12, 6, 32, 24};
  const auto seed = static_cast<uint32_t>(page_tokens * 100 + group * 10 + (type == KvType::F16));
  auto map = shuffled_cross_layer_map(shape, group, seed);
  ASSERT_FALSE(map->per_layer());
  Env env(shape, page_tokens, group, type, map);
  ThreadPool pool(3);
  std::mt19937 rng(seed);
  Seq s = make_seq(env);

  step_layer_by_layer(s, 60, rng, pool, "prefill");
  for (int l = 0; l < 3; ++l) check_attend(s, l, 60, rng, pool, "prefill (split plans)");
  compact_randomly(s, rng);  // ragged per-head lengths, whole pages released per group
  for (int step = 0; step < 3; ++step) step_layer_by_layer(s, 1, rng, pool, "decode");
  step_layer_by_layer(s, 37, rng, pool, "second turn prefill");
  for (int l = 0; l < 3; ++l) check_attend(s, l, 37, rng, pool, "second turn (split plans)");
  compact_randomly(s, rng);
  step_layer_by_layer(s, 1, rng, pool, "second turn decode");
  // Every group holds exactly the pages its longest member needs.
  const int64_t P = page_tokens;
  for (int g = 0; g < map->total_groups(); ++g) {
    int64_t longest = 0;
    for (const int f : map->members(g))
      longest = std::max(longest, s.cache->length(map->layer_of_head(f), map->kv_head_of(f)));
    EXPECT_EQ(static_cast<int64_t>(s.cache->group_pages(g).size()), (longest + P - 1) / P)
        << "group " << g;
  }
  EXPECT_TRUE(env.pool->check_consistency().ok());
}

INSTANTIATE_TEST_SUITE_P(PagesGroupsTypes, CrossLayerAttentionSweep,
                         ::testing::Combine(::testing::Values(1, 5, 16, 32, 48, 64, 96, 128),
                                            ::testing::Values(2, 4, 5, 8),
                                            ::testing::Values(KvType::F32, KvType::F16,
                                                              KvType::Q8_0)),
                         [](const ::testing::TestParamInfo<Param>& p) {
                           return fmt::format("P{}_G{}_{}", std::get<0>(p.param),
                                              std::get<1>(p.param),
                                              kv_type_name(std::get<2>(p.param)));
                         });

TEST(PagedAttention, NonContiguousHeadGroups) {
  using Groups = std::vector<std::vector<std::vector<int>>>;
  const KvShape shape{2, 32, 8, 64, 64};
  auto map = std::make_shared<const HeadGroupMap>(
      HeadGroupMap::from_groups(
          8, 4, Groups{{{7, 2, 5}, {0}, {1, 3, 4, 6}}, {{6, 1}, {0, 7}, {2, 3}, {4, 5}}})
          .value());
  for (const KvType type : {KvType::F32, KvType::F16}) {
    Env env(shape, 16, 4, type, map);
    ThreadPool pool(2);
    std::mt19937 rng(11);
    Seq s = make_seq(env);
    append(s, 50, rng);
    for (int l = 0; l < 2; ++l) check_attend(s, l, 50, rng, pool, "prefill");
    compact_randomly(s, rng);
    append(s, 1, rng);
    for (int l = 0; l < 2; ++l) check_attend(s, l, 1, rng, pool, "decode");
  }
}

TEST(PagedAttention, ScalarPathForHeadSizesNotMultipleOf8) {
  const KvShape shape{1, 6, 3, 12, 20};
  for (const KvType type : {KvType::F32, KvType::F16}) {
    Env env(shape, 4, 2, type);
    ThreadPool pool(2);
    std::mt19937 rng(12);
    Seq s = make_seq(env);
    append(s, 37, rng);
    check_attend(s, 0, 37, rng, pool, "prefill");
    compact_randomly(s, rng);
    append(s, 1, rng);
    check_attend(s, 0, 1, rng, pool, "decode");
  }
}

TEST(PagedAttention, ManyQueryHeadsPerKvHead) {
  // 12 query heads per KV head: more lanes than one register group.
  const KvShape shape{1, 24, 2, 16, 16};
  Env env(shape, 16, 2, KvType::F16);
  ThreadPool pool(2);
  std::mt19937 rng(13);
  Seq s = make_seq(env);
  append(s, 100, rng);
  check_attend(s, 0, 9, rng, pool, "prefill tail");
  append(s, 1, rng);
  check_attend(s, 0, 1, rng, pool, "decode");
}

TEST(PagedAttention, LongHeadsSplitAcrossThreadsMergeExactly) {
  const KvShape shape{1, 8, 2, 64, 64};
  Env env(shape, 16, 2, KvType::F32);
  ThreadPool pool(4);
  std::mt19937 rng(14);
  Seq s = make_seq(env);
  append(s, 3000, rng);
  compact_randomly(s, rng);
  append(s, 1, rng);
  const auto q = random_values(8 * 64, rng, 2.0f);
  const auto want = s.mirror->attend(0, q.data(), 1, s.cache->n_positions() - 1);
  AttentionWorkspace ws;
  const AttentionItem item{s.cache.get(), q.data(), nullptr, 1, s.cache->n_positions() - 1};
  std::vector<float> got(want.size());
  AttentionItem it = item;
  it.out = got.data();
  ASSERT_TRUE(paged_attention(0, std::span(&it, 1), pool, ws).ok());
  EXPECT_GT(ws.plan.merges.size(), 0u);  // the default plan split the long heads
  EXPECT_LE(max_abs_diff(want, got), kTol);
  // The same plan with a fixed thread assignment gives the same numbers.
  std::vector<float> fixed(want.size());
  it.out = fixed.data();
  ASSERT_TRUE(build_attention_batch(0, std::span(&it, 1), ws.batch).ok());
  ws.plan.thread_begin.clear();
  for (int t = 0; t <= pool.size(); ++t)
    ws.plan.thread_begin.push_back(static_cast<int32_t>(
        ws.plan.work.size() * static_cast<size_t>(t) / static_cast<size_t>(pool.size())));
  ASSERT_TRUE(run_attention(ws.batch, ws.plan, pool, ws).ok());
  EXPECT_EQ(got, fixed);
  // Every item assigned to the last thread: the others take its unstarted items (work_ranges.h),
  // and the numbers stay the same whoever runs which part.
  std::fill(ws.plan.thread_begin.begin(), ws.plan.thread_begin.end() - 1, 0);
  std::vector<float> lopsided(want.size());
  it.out = lopsided.data();
  ASSERT_TRUE(build_attention_batch(0, std::span(&it, 1), ws.batch).ok());
  ASSERT_TRUE(run_attention(ws.batch, ws.plan, pool, ws).ok());
  EXPECT_EQ(got, lopsided);
}

TEST(PagedAttention, BatchOfSequencesInOneCall) {
  const KvShape shape{2, 16, 4, 32, 32};
  Env env(shape, 8, 2, KvType::F16);
  ThreadPool pool(3);
  std::mt19937 rng(15);
  using Groups = std::vector<std::vector<std::vector<int>>>;
  Env other(
      shape, 4, 3, KvType::F16,
      std::make_shared<const HeadGroupMap>(
          HeadGroupMap::from_groups(4, 3, Groups{{{3, 1, 0}, {2}}, {{2}, {0, 1, 3}}}).value()));
  std::vector<Seq> seqs;  // after the pools: caches go first
  const int64_t lengths[] = {5, 130, 1, 64};
  for (const int64_t len : lengths) {
    seqs.push_back(make_seq(env));
    append(seqs.back(), len, rng);
  }
  compact_randomly(seqs[1], rng);
  append(seqs[3], 7, rng);  // this one runs a 7-row prefill chunk; the others decode
  std::vector<std::vector<float>> q, out;
  std::vector<AttentionItem> items;
  for (Seq& s : seqs) {
    const int64_t n = &s == &seqs[3] ? 7 : 1;
    q.push_back(random_values(static_cast<size_t>(n * 16 * 32), rng, 2.0f));
    out.emplace_back(static_cast<size_t>(n * 16 * 32), -7.0f);
    items.push_back(
        {s.cache.get(), q.back().data(), out.back().data(), n, s.cache->n_positions() - n});
  }
  // One more sequence whose cache groups its heads differently (same shape and type).
  seqs.push_back(make_seq(other));
  append(seqs.back(), 77, rng);
  compact_randomly(seqs.back(), rng);
  append(seqs.back(), 1, rng);
  q.push_back(random_values(16 * 32, rng, 2.0f));
  out.emplace_back(16 * 32, -7.0f);
  items.push_back({seqs.back().cache.get(), q.back().data(), out.back().data(), 1,
                   seqs.back().cache->n_positions() - 1});
  AttentionWorkspace ws;
  for (int layer = 0; layer < 2; ++layer) {
    ASSERT_TRUE(paged_attention(layer, items, pool, ws).ok());
    for (size_t i = 0; i < seqs.size(); ++i) {
      const auto want = seqs[i].mirror->attend(layer, items[i].q, items[i].n, items[i].pos0);
      const auto bound =
          seqs[i].mirror->weight_rounding_bound(layer, items[i].q, items[i].n, items[i].pos0);
      EXPECT_LE(max_excess(want, out[i], bound), kTol) << "sequence " << i << " layer " << layer;
    }
  }
}

TEST(PagedAttention, DefaultPlanGivesOneItemPerHeadGroup) {
  using Groups = std::vector<std::vector<std::vector<int>>>;
  const KvShape shape{1, 16, 8, 32, 32};  // 2 query heads per KV head
  auto map = std::make_shared<const HeadGroupMap>(
      HeadGroupMap::from_groups(8, 4, Groups{{{7, 2, 5}, {0}, {1, 3, 4, 6}}}).value());
  Env env(shape, 16, 4, KvType::F16, map);
  std::mt19937 rng(21);
  Seq s = make_seq(env);
  append(s, 40, rng);
  std::vector<float> q(5 * 16 * 32), out(q.size());
  AttentionWorkspace ws;
  const AttentionItem decode{s.cache.get(), q.data(), out.data(), 1, 39};
  ASSERT_TRUE(build_attention_batch(0, std::span(&decode, 1), ws.batch).ok());
  plan_attention(ws.batch, 1, ws.plan);
  ASSERT_EQ(ws.plan.work.size(), 3u);
  std::vector<std::vector<int>> covered;
  for (const AttentionWork& w : ws.plan.work) {
    std::vector<int> heads;
    for (int32_t i = w.head_begin; i < w.head_end; ++i)
      heads.push_back(ws.batch.head_order[static_cast<size_t>(i)]);
    covered.push_back(heads);
    EXPECT_EQ(w.merge, -1);
  }
  std::sort(covered.begin(), covered.end());
  EXPECT_EQ(covered, (std::vector<std::vector<int>>{{0}, {1, 3, 4, 6}, {7, 2, 5}}));
  AttentionPlanOptions per_head;
  per_head.whole_groups = false;
  plan_attention(ws.batch, 1, ws.plan, per_head);
  EXPECT_EQ(ws.plan.work.size(), 8u);
  // 5 query rows, 4 rows (8 lanes) per KV head and item: 2 row tiles per group.
  const AttentionItem prefill{s.cache.get(), q.data(), out.data(), 5, 35};
  ASSERT_TRUE(build_attention_batch(0, std::span(&prefill, 1), ws.batch).ok());
  plan_attention(ws.batch, 1, ws.plan);
  EXPECT_EQ(ws.plan.work.size(), 6u);
}

TEST(PagedAttention, BatchRejectsMixedShapesAndBadItems) {
  Env a(KvShape{1, 4, 2, 8, 8}, 4, 2, KvType::F16);
  Env b(KvShape{1, 4, 4, 8, 8}, 4, 2, KvType::F16);
  auto ca = a.cache();
  auto cb = b.cache();
  std::vector<float> q(32), out(32);
  AttentionBatch batch;
  std::vector<AttentionItem> items{{ca.get(), q.data(), out.data(), 1, 0},
                                   {cb.get(), q.data(), out.data(), 1, 0}};
  EXPECT_FALSE(build_attention_batch(0, items, batch).ok());
  items.pop_back();
  EXPECT_FALSE(build_attention_batch(1, items, batch).ok());  // no layer 1
  items[0].q = nullptr;
  EXPECT_FALSE(build_attention_batch(0, items, batch).ok());
  items[0].q = q.data();
  items[0].n = -1;
  EXPECT_FALSE(build_attention_batch(0, items, batch).ok());
  EXPECT_FALSE(build_attention_batch(0, {}, batch).ok());
}

TEST(PagedAttention, RunRejectsPlansThatDoNotFitTheBatch) {
  Env env(KvShape{1, 4, 2, 8, 8}, 4, 2, KvType::F16);
  auto cache = env.cache();
  std::vector<float> q(32), out(32);
  const AttentionItem item{cache.get(), q.data(), out.data(), 1, 0};
  AttentionWorkspace ws;
  ThreadPool pool(1);
  ASSERT_TRUE(build_attention_batch(0, std::span(&item, 1), ws.batch).ok());
  AttentionPlan plan;
  // Fields: seq, head_begin, head_end, row_begin, row_end, entry_begin, entry_end, merge, partial.
  plan.work.push_back({0, 1, 3, 0, 1, 0, 1, -1, 0});  // heads 1..2 of 2
  EXPECT_FALSE(run_attention(ws.batch, plan, pool, ws).ok());
  plan.work[0] = {0, 1, 1, 0, 1, 0, 1, -1, 0};  // no head
  EXPECT_FALSE(run_attention(ws.batch, plan, pool, ws).ok());
  plan.work[0] = {0, 0, 1, 0, 2, 0, 1, -1, 0};  // row 1 of 1
  EXPECT_FALSE(run_attention(ws.batch, plan, pool, ws).ok());
  plan.work[0] = {1, 0, 1, 0, 1, 0, 1, -1, 0};  // sequence 1 of 1
  EXPECT_FALSE(run_attention(ws.batch, plan, pool, ws).ok());
  plan.work[0] = {0, 0, 1, 0, 1, 0, 1, 0, 0};  // merge 0 missing
  EXPECT_FALSE(run_attention(ws.batch, plan, pool, ws).ok());
  plan.merges.push_back({0, 0, 1, 0, 1, 0, 2});  // expects 2 parts, has 1
  plan.n_partial_slots = 4;
  EXPECT_FALSE(run_attention(ws.batch, plan, pool, ws).ok());
  plan.merges[0].n_parts = 1;
  plan.work[0].partial = 3;  // lanes 3..4 of 4 slots
  EXPECT_FALSE(run_attention(ws.batch, plan, pool, ws).ok());
  plan.work[0].partial = 0;
  EXPECT_TRUE(run_attention(ws.batch, plan, pool, ws).ok());
  plan.thread_begin = {0, 2};  // covers 2 of 1 items
  EXPECT_FALSE(run_attention(ws.batch, plan, pool, ws).ok());
  plan.thread_begin.clear();
  ws.batch.head_order[1] = 0;  // not a permutation
  EXPECT_FALSE(run_attention(ws.batch, plan, pool, ws).ok());
}

TEST(PagedAttention, HeadWithoutEntriesGivesZeros) {
  const KvShape shape{1, 4, 2, 8, 8};
  Env env(shape, 4, 2, KvType::F32);
  ThreadPool pool(1);
  std::mt19937 rng(16);
  Seq s = make_seq(env);
  append(s, 10, rng);
  ASSERT_TRUE(s.cache->set_head_length(0, 1, 0).ok());
  s.mirror->set_length(0, 1, 0);
  check_attend(s, 0, 1, rng, pool, "empty head");
  std::vector<float> q(32, 1.0f), out(32, -7.0f);
  attend_cache(*s.cache, 0, q.data(), 1, 9, out.data(), pool);
  for (int i = 16; i < 32; ++i)
    EXPECT_EQ(out[static_cast<size_t>(i)], 0.0f);  // heads 2, 3 read KV head 1
}

TEST(PagedAttention, LargeScoresStayFinite) {
  const KvShape shape{1, 8, 4, 32, 32};
  Env env(shape, 16, 4, KvType::F32);
  ThreadPool pool(2);
  std::mt19937 rng(17);
  Seq s = make_seq(env);
  append(s, 200, rng);
  const auto q = random_values(8 * 32, rng, 60.0f);  // scores in the hundreds
  const int64_t pos = s.cache->n_positions() - 1;
  const auto want = s.mirror->attend(0, q.data(), 1, pos);
  std::vector<float> got(want.size());
  attend_cache(*s.cache, 0, q.data(), 1, pos, got.data(), pool);
  EXPECT_LE(max_abs_diff(want, got), 1e-4);  // near one-hot: a score error of 1e-5 shows
}

TEST(PagedAttention, F16StorageStaysCloseToUnroundedInputs) {
  const KvShape shape{1, 8, 4, 64, 64};
  Env env(shape, 16, 4, KvType::F16);
  ThreadPool pool(2);
  std::mt19937 rng(18);
  auto cache = env.cache();
  KvMirror exact(shape, KvType::F32);  // keeps the unrounded floats
  const int64_t n = 300;
  const auto k = random_values(static_cast<size_t>(n * 4 * 64), rng);
  const auto v = random_values(static_cast<size_t>(n * 4 * 64), rng);
  ASSERT_TRUE(cache->reserve(n).ok());
  ASSERT_TRUE(cache->write(0, 0, k.data(), v.data(), n).ok());
  exact.write(0, k.data(), v.data(), n);
  const auto q = random_values(8 * 64, rng, 2.0f);
  const auto want = exact.attend(0, q.data(), 1, n - 1);
  std::vector<float> got(want.size());
  attend_cache(*cache, 0, q.data(), 1, n - 1, got.data(), pool);
  const double err = max_abs_diff(want, got);
  EXPECT_LE(err, 1e-2);
  EXPECT_GT(err, 1e-6);  // the rounding is really there
}

TEST(PagedAttention, AgreesWithContiguousCacheAtEqualLengths) {
  const KvShape shape{2, 8, 2, 32, 32};
  for (const KvType type : {KvType::F32, KvType::F16, KvType::Q8_0}) {
    // Q8_0: the paged loops round the query per block for integer dot products, the
    // contiguous cache attends with the float query. With these queries (sigma 2, head size
    // 32) the rounding moves each score by up to ~0.05 and outputs by up to ~0.02 (the worst
    // case bound of q8_attention_test.cpp is looser, ~0.5); a wrong loop is off by O(1).
    const double tol = type == KvType::Q8_0 ? 5e-2 : 2e-5;
    Env env(shape, 16, 2, type);
    ThreadPool pool(2);
    std::mt19937 rng(19);
    auto paged = env.cache();
    ContiguousKvCache dense(shape, 4096, type);
    for (const int64_t n : {40, 1, 1}) {
      const int64_t pos0 = paged->n_positions();
      ASSERT_TRUE(paged->reserve(pos0 + n).ok());
      ASSERT_TRUE(dense.reserve(pos0 + n).ok());
      for (int l = 0; l < 2; ++l) {
        const auto k = random_values(static_cast<size_t>(n * 2 * 32), rng);
        const auto v = random_values(static_cast<size_t>(n * 2 * 32), rng);
        ASSERT_TRUE(paged->write(l, pos0, k.data(), v.data(), n).ok());
        ASSERT_TRUE(dense.write(l, pos0, k.data(), v.data(), n).ok());
        const auto q = random_values(static_cast<size_t>(n * 8 * 32), rng, 2.0f);
        std::vector<float> a(static_cast<size_t>(n * 8 * 32)), b(a.size());
        attend_cache(*paged, l, q.data(), n, pos0, a.data(), pool);
        attend_cache(dense, l, q.data(), n, pos0, b.data(), pool);
        for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol) << i;
      }
    }
    EXPECT_EQ(paged->n_positions(), dense.n_positions());
  }
}

TEST(DenseAttention, MatchesReference) {
  const KvShape shape{1, 16, 4, 32, 32};
  ThreadPool pool(2);
  std::mt19937 rng(20);
  const int64_t len = 333;
  for (const KvType type : {KvType::F32, KvType::F16, KvType::Q8_0}) {
    // Dense arrays [kv][len][d] and a mirror with the same (rounded) values.
    const auto kf = random_values(static_cast<size_t>(4 * len * 32), rng);
    const auto vf = random_values(static_cast<size_t>(4 * len * 32), rng);
    KvMirror mirror(shape, type);
    std::vector<float> kt(static_cast<size_t>(len * 4 * 32)), vt(kt.size());  // token-major
    for (int64_t t = 0; t < len; ++t)
      for (int h = 0; h < 4; ++h)
        for (int i = 0; i < 32; ++i) {
          kt[static_cast<size_t>((t * 4 + h) * 32 + i)] =
              kf[static_cast<size_t>((h * len + t) * 32 + i)];
          vt[static_cast<size_t>((t * 4 + h) * 32 + i)] =
              vf[static_cast<size_t>((h * len + t) * 32 + i)];
        }
    mirror.write(0, kt.data(), vt.data(), len);
    const size_t row = kv_row_bytes(type, 32);
    std::vector<uint8_t> kb(static_cast<size_t>(4 * len) * row), vb(kb.size());  // [kv][len][row]
    for (size_t r = 0; r < static_cast<size_t>(4 * len); ++r) {
      store_kv_row(type, kf.data() + r * 32, kb.data() + r * row, 32);
      store_kv_row(type, vf.data() + r * 32, vb.data() + r * row, 32);
    }
    DenseKv kv{kb.data(), vb.data(), len, type};
    AttentionWorkspace ws;
    const int64_t n = 5, pos0 = len - n;
    const auto q = random_values(static_cast<size_t>(n * 16 * 32), rng, 2.0f);
    std::vector<float> got(static_cast<size_t>(n * 16 * 32));
    ASSERT_TRUE(dense_attention(shape, kv, q.data(), n, pos0, got.data(), pool, ws).ok());
    EXPECT_LE(max_excess(mirror.attend(0, q.data(), n, pos0), got,
                         mirror.weight_rounding_bound(0, q.data(), n, pos0)),
              kTol);
  }
}

}  // namespace
}  // namespace tangram
