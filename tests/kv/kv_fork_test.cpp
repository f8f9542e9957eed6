// Forked paged caches: the n choices of one prompt share its pages (reference counts in the
// pool), copy a shared page before writing or compacting into it, and attend exactly as a cache
// that prefilled the same tokens on its own.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "common/thread_pool.h"
#include "kv/block_pool.h"
#include "kv/kv_test_util.h"
#include "kv/paged_kv_cache.h"

namespace tangram {
namespace {

using testing::attend_cache;
using testing::cache_matches_mirror;
using testing::KvMirror;
using testing::random_values;

constexpr KvShape kShape{2, 8, 4, 8, 16};  // layers, heads, KV heads, head_dim, head_dim_v

std::unique_ptr<BlockPool> make_pool(int page_tokens, int group, int64_t n_pages) {
  PageGeometry g;
  g.page_tokens = page_tokens;
  g.group_size = group;
  g.head_dim = kShape.head_dim;
  g.head_dim_v = kShape.head_dim_v;
  g.type = KvType::F16;
  return std::move(BlockPool::create(g, static_cast<size_t>(n_pages) * g.page_bytes()).value());
}

std::unique_ptr<PagedKvCache> make_cache(BlockPool& pool, std::shared_ptr<const HeadGroupMap> map) {
  return std::move(PagedKvCache::create(kShape, 1000, pool, std::move(map)).value());
}

// Rows of n positions for every layer: k [layers][n][n_kv_head][head_dim], v likewise.
struct Rows {
  std::vector<std::vector<float>> k, v;
  int64_t n = 0;
};

Rows random_rows(int64_t n, std::mt19937& rng) {
  Rows r;
  r.n = n;
  for (int l = 0; l < kShape.n_layers; ++l) {
    r.k.push_back(random_values(static_cast<size_t>(n * kShape.n_kv_head * kShape.head_dim), rng));
    r.v.push_back(
        random_values(static_cast<size_t>(n * kShape.n_kv_head * kShape.head_dim_v), rng));
  }
  return r;
}

void append(PagedKvCache& cache, KvMirror& mirror, const Rows& rows, bool reserve = true) {
  if (reserve) {
    ASSERT_TRUE(cache.reserve(cache.n_positions() + rows.n).ok());
  }
  for (int l = 0; l < kShape.n_layers; ++l) {
    const auto li = static_cast<size_t>(l);
    ASSERT_TRUE(
        cache.write(l, mirror.positions(l), rows.k[li].data(), rows.v[li].data(), rows.n).ok());
    mirror.write(l, rows.k[li].data(), rows.v[li].data(), rows.n);
  }
}

TEST(BlockPoolSharing, ReferenceCountsDecideWhenAPageIsFree) {
  auto pool = make_pool(4, 2, 8);
  std::vector<PageId> pages;
  ASSERT_TRUE(pool->allocate(3, pages).ok());
  EXPECT_EQ(pool->ref_count(pages[0]), 1);
  ASSERT_TRUE(pool->share(pages).ok());
  ASSERT_TRUE(pool->share(std::span<const PageId>(pages.data(), 1)).ok());
  EXPECT_EQ(pool->ref_count(pages[0]), 3);
  EXPECT_EQ(pool->ref_count(pages[1]), 2);
  EXPECT_EQ(pool->used_pages(), 3);  // shared pages count once
  EXPECT_EQ(pool->stats().shared_pages, 3);
  EXPECT_EQ(pool->stats().referenced_slots, 7 * pool->geometry().slots_per_page());
  EXPECT_TRUE(pool->check_consistency().ok());
  ASSERT_TRUE(pool->release(pages).ok());
  EXPECT_EQ(pool->used_pages(), 3);
  EXPECT_FALSE(pool->shared(pages[1]));
  ASSERT_TRUE(pool->release(std::span<const PageId>(pages.data() + 1, 2)).ok());
  EXPECT_EQ(pool->used_pages(), 1);
  EXPECT_EQ(pool->ref_count(pages[0]), 2);
  ASSERT_TRUE(pool->release(std::span<const PageId>(pages.data(), 1)).ok());
  ASSERT_TRUE(pool->release(std::span<const PageId>(pages.data(), 1)).ok());
  EXPECT_EQ(pool->used_pages(), 0);
  EXPECT_EQ(pool->stats().shared_pages, 0);
  EXPECT_TRUE(pool->check_consistency().ok());
  // A free page can be neither shared nor released; nothing changes on the error.
  EXPECT_FALSE(pool->share(pages).ok());
  EXPECT_FALSE(pool->release(pages).ok());
  EXPECT_EQ(pool->ref_count(pages[0]), 0);
  EXPECT_TRUE(pool->check_consistency().ok());
}

TEST(PagedKvCacheFork, SharesEveryPageAndCopiesOnlyWhatItWrites) {
  auto pool = make_pool(4, 2, 64);
  auto map = std::make_shared<const HeadGroupMap>(HeadGroupMap::contiguous(2, 4, 2).value());
  std::mt19937 rng(11);
  auto parent = make_cache(*pool, map);
  KvMirror parent_mirror(kShape, KvType::F16);
  append(*parent, parent_mirror,
         random_rows(10, rng));  // 3 pages per group, the last partly filled
  const int64_t held = parent->pages_held();
  ASSERT_EQ(held, 4 * 3);
  ASSERT_EQ(pool->used_pages(), held);

  auto fork = std::move(parent->fork().value());
  KvMirror fork_mirror = parent_mirror;
  EXPECT_EQ(pool->used_pages(), held);  // nothing copied at the fork
  EXPECT_EQ(fork->pages_held(), held);
  EXPECT_EQ(fork->pages_shared(), held);
  for (int fg = 0; fg < map->total_groups(); ++fg)
    for (const PageId id : fork->group_pages(fg)) EXPECT_EQ(pool->ref_count(id), 2);
  EXPECT_TRUE(cache_matches_mirror(*fork, fork_mirror));
  EXPECT_TRUE(pool->check_consistency().ok());

  // The fork's next token goes into the partly filled last page of each group: one copy each.
  EXPECT_EQ(fork->pages_needed(11), map->total_groups());
  append(*fork, fork_mirror, random_rows(1, rng));
  EXPECT_EQ(pool->used_pages(), held + map->total_groups());
  EXPECT_EQ(fork->pages_shared(), held - map->total_groups());
  // The parent's last pages are its own again: it appends in place.
  EXPECT_EQ(parent->pages_needed(11), 0);
  append(*parent, parent_mirror, random_rows(1, rng));
  EXPECT_EQ(pool->used_pages(), held + map->total_groups());
  // Two more tokens each: a new page per group for both, nothing shared is written.
  append(*fork, fork_mirror, random_rows(2, rng));
  append(*parent, parent_mirror, random_rows(2, rng));
  EXPECT_EQ(pool->used_pages(), held + 3 * map->total_groups());
  EXPECT_TRUE(cache_matches_mirror(*fork, fork_mirror));
  EXPECT_TRUE(cache_matches_mirror(*parent, parent_mirror));
  EXPECT_TRUE(pool->check_consistency().ok());

  fork.reset();  // drops its references; the shared prompt pages stay with the parent
  EXPECT_EQ(pool->used_pages(), parent->pages_held());
  EXPECT_EQ(parent->pages_shared(), 0);
  EXPECT_TRUE(cache_matches_mirror(*parent, parent_mirror));
  parent.reset();
  EXPECT_EQ(pool->used_pages(), 0);
  EXPECT_EQ(pool->stats().used_slots, 0);
  EXPECT_TRUE(pool->check_consistency().ok());
}

TEST(PagedKvCacheFork, UnreservedWriteCopiesTheSharedPageFirst) {
  auto pool = make_pool(4, 4, 64);
  auto map = std::make_shared<const HeadGroupMap>(HeadGroupMap::contiguous(2, 4, 4).value());
  std::mt19937 rng(12);
  auto parent = make_cache(*pool, map);
  KvMirror parent_mirror(kShape, KvType::F16);
  ASSERT_TRUE(parent->reserve(8).ok());  // room for 8, 6 written: the fork inherits the room
  append(*parent, parent_mirror, random_rows(6, rng), /*reserve=*/false);
  auto fork = std::move(parent->fork().value());
  KvMirror fork_mirror = parent_mirror;
  append(*fork, fork_mirror, random_rows(2, rng), /*reserve=*/false);
  append(*parent, parent_mirror, random_rows(2, rng), /*reserve=*/false);
  EXPECT_TRUE(cache_matches_mirror(*fork, fork_mirror));
  EXPECT_TRUE(cache_matches_mirror(*parent, parent_mirror));
  EXPECT_EQ(pool->used_pages(), 2 * 2 + 2);  // page 0 of each group shared, page 1 copied
  EXPECT_TRUE(pool->check_consistency().ok());
}

TEST(PagedKvCacheFork, CompactionOfOneForkLeavesTheOthersPagesAlone) {
  auto pool = make_pool(4, 2, 64);
  auto map = std::make_shared<const HeadGroupMap>(HeadGroupMap::contiguous(2, 4, 2).value());
  std::mt19937 rng(13);
  auto parent = make_cache(*pool, map);
  KvMirror parent_mirror(kShape, KvType::F16);
  append(*parent, parent_mirror, random_rows(20, rng));
  auto fork = std::move(parent->fork().value());
  KvMirror fork_mirror = parent_mirror;
  const int64_t before = pool->used_pages();
  // Each choice compresses differently.
  const std::vector<int64_t> keep_fork{0, 5, 6, 13, 19};
  ASSERT_TRUE(fork->compact_head(1, 2, keep_fork).ok());
  fork_mirror.compact(1, 2, keep_fork);
  const std::vector<int64_t> keep_parent{2, 3, 4, 8};
  ASSERT_TRUE(parent->compact_head(1, 2, keep_parent).ok());
  parent_mirror.compact(1, 2, keep_parent);
  // keep_fork moves rows into pages 0-1 of the group: two copies. Page 0 is then the parent's
  // alone, so the parent compacts into it in place.
  EXPECT_EQ(pool->used_pages(), before + 2);
  // Keeping a prefix moves nothing, so nothing is copied.
  const std::vector<int64_t> prefix{0, 1, 2};
  ASSERT_TRUE(fork->compact_head(0, 0, prefix).ok());
  fork_mirror.compact(0, 0, prefix);
  EXPECT_EQ(pool->used_pages(), before + 2);
  EXPECT_TRUE(cache_matches_mirror(*fork, fork_mirror));
  EXPECT_TRUE(cache_matches_mirror(*parent, parent_mirror));
  // Trailing pages neither needs go back once both have let go of them.
  fork->release_unused_pages();
  parent->release_unused_pages();
  EXPECT_TRUE(cache_matches_mirror(*fork, fork_mirror));
  EXPECT_TRUE(cache_matches_mirror(*parent, parent_mirror));
  EXPECT_TRUE(pool->check_consistency().ok());
  fork.reset();
  parent.reset();
  EXPECT_EQ(pool->used_pages(), 0);
  EXPECT_TRUE(pool->check_consistency().ok());
}

// Per head-group layout of each policy: unified pages (full, uniform, dynamic...), contiguous
// groups, and tangram's global groups of heads from several layers.
std::vector<std::shared_ptr<const HeadGroupMap>> policy_maps() {
  return {std::make_shared<const HeadGroupMap>(HeadGroupMap::contiguous(2, 4, 4).value()),
          std::make_shared<const HeadGroupMap>(HeadGroupMap::contiguous(2, 4, 2).value()),
          std::make_shared<const HeadGroupMap>(
              HeadGroupMap::from_flat_groups(2, 4, 4, {{0, 5, 7}, {4, 1}, {2, 6, 3}}).value())};
}

TEST(PagedKvCacheFork, ForkAttendsLikeAnIndependentlyPrefilledCache) {
  ThreadPool threads(2);
  for (const auto& map : policy_maps()) {
    auto pool = make_pool(4, 4, 256);
    std::mt19937 rng(14);
    const Rows prompt = random_rows(13, rng);
    auto parent = make_cache(*pool, map);
    KvMirror parent_mirror(kShape, KvType::F16);
    append(*parent, parent_mirror, prompt);
    // The forks and an independent cache per fork: same prompt, same decoded rows.
    std::vector<std::unique_ptr<PagedKvCache>> forks, alone;
    std::vector<KvMirror> alone_mirrors;
    for (int i = 0; i < 3; ++i) {
      forks.push_back(std::move(parent->fork().value()));
      alone.push_back(make_cache(*pool, map));
      alone_mirrors.emplace_back(kShape, KvType::F16);
      append(*alone.back(), alone_mirrors.back(), prompt);
    }
    for (int step = 0; step < 6; ++step)
      for (size_t i = 0; i < forks.size(); ++i) {
        const Rows token = random_rows(1, rng);
        KvMirror fork_mirror = alone_mirrors[i];
        append(*forks[i], fork_mirror, token);
        append(*alone[i], alone_mirrors[i], token);
      }
    append(*parent, parent_mirror, random_rows(2, rng));
    for (size_t i = 0; i < forks.size(); ++i) {
      ASSERT_TRUE(cache_matches_mirror(*forks[i], alone_mirrors[i]));
      for (int l = 0; l < kShape.n_layers; ++l) {
        const int64_t n = 2;
        const int64_t pos0 = forks[i]->n_positions() - n;
        const auto q = random_values(static_cast<size_t>(n * kShape.n_head * kShape.head_dim), rng);
        std::vector<float> got(static_cast<size_t>(n * kShape.n_head * kShape.head_dim_v));
        std::vector<float> want(got.size());
        attend_cache(*forks[i], l, q.data(), n, pos0, got.data(), threads);
        attend_cache(*alone[i], l, q.data(), n, pos0, want.data(), threads);
        EXPECT_EQ(got, want) << "fork " << i << " layer "
                             << l;  // same rows, same kernel: identical
        EXPECT_LT(testing::max_abs_diff(alone_mirrors[i].attend(l, q.data(), n, pos0), got), 1e-4);
      }
    }
    EXPECT_TRUE(cache_matches_mirror(*parent, parent_mirror));
    forks.clear();
    alone.clear();
    parent.reset();
    EXPECT_EQ(pool->used_pages(), 0);
    EXPECT_TRUE(pool->check_consistency().ok());
  }
}

}  // namespace
}  // namespace tangram
