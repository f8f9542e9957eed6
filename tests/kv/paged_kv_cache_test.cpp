#include "kv/paged_kv_cache.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

#include "kv/kv_test_util.h"

namespace tangram {
namespace {

using testing::cache_matches_mirror;
using testing::KvMirror;
using testing::random_values;

constexpr KvShape kShape{2, 8, 4, 8, 16};  // layers, heads, KV heads, head_dim, head_dim_v

struct PoolSetup {
  std::unique_ptr<BlockPool> pool;
  std::shared_ptr<const HeadGroupMap> map;

  PoolSetup(int page_tokens, int group, int64_t n_pages, KvType type = KvType::F16,
            const KvShape& shape = kShape) {
    PageGeometry g;
    g.page_tokens = page_tokens;
    g.group_size = group;
    g.head_dim = shape.head_dim;
    g.head_dim_v = shape.head_dim_v;
    g.type = type;
    pool = std::move(BlockPool::create(g, static_cast<size_t>(n_pages) * g.page_bytes()).value());
    map = std::make_shared<const HeadGroupMap>(
        HeadGroupMap::contiguous(shape.n_layers, shape.n_kv_head, group).value());
  }
  std::unique_ptr<PagedKvCache> cache(int64_t capacity = 1000, const KvShape& shape = kShape) {
    auto c = PagedKvCache::create(shape, capacity, *pool, map);
    EXPECT_TRUE(c.ok()) << c.message();
    return std::move(c).value();
  }
};

// Writes n positions to every layer of cache and mirror.
void write_tokens(PagedKvCache& cache, KvMirror& mirror, int64_t n, std::mt19937& rng) {
  const KvShape& s = cache.shape();
  for (int l = 0; l < s.n_layers; ++l) {
    const auto k = random_values(static_cast<size_t>(n * s.n_kv_head * s.head_dim), rng);
    const auto v = random_values(static_cast<size_t>(n * s.n_kv_head * s.head_dim_v), rng);
    ASSERT_TRUE(cache.write(l, mirror.positions(l), k.data(), v.data(), n).ok());
    mirror.write(l, k.data(), v.data(), n);
  }
}

TEST(PagedKvCache, CreateValidatesShapeMapAndPool) {
  PoolSetup s(16, 2, 8);
  EXPECT_TRUE(PagedKvCache::create(kShape, 100, *s.pool, s.map).ok());
  KvShape bad = kShape;
  bad.head_dim = 16;  // pool pages hold head_dim 8
  EXPECT_FALSE(PagedKvCache::create(bad, 100, *s.pool, s.map).ok());
  bad = kShape;
  bad.n_head = 6;  // not a multiple of n_kv_head
  EXPECT_FALSE(PagedKvCache::create(bad, 100, *s.pool, s.map).ok());
  bad = kShape;
  bad.n_layers = 3;  // map is for 2 layers
  EXPECT_FALSE(PagedKvCache::create(bad, 100, *s.pool, s.map).ok());
  EXPECT_FALSE(PagedKvCache::create(kShape, 0, *s.pool, s.map).ok());
  EXPECT_FALSE(PagedKvCache::create(kShape, 100, *s.pool, nullptr).ok());
  auto wide = std::make_shared<const HeadGroupMap>(HeadGroupMap::contiguous(2, 4, 4).value());
  EXPECT_FALSE(PagedKvCache::create(kShape, 100, *s.pool, wide).ok());  // groups > page columns
}

TEST(PagedKvCache, ReserveAllocatesPerGroupAndWriteStoresRows) {
  PoolSetup s(4, 2, 64);
  auto cache = s.cache();
  KvMirror mirror(kShape, KvType::F16);
  std::mt19937 rng(1);
  EXPECT_EQ(cache->pages_needed(10), 2 * 2 * 3);  // layers x groups x ceil(10 / 4)
  ASSERT_TRUE(cache->reserve(10).ok());
  EXPECT_EQ(cache->pages_held(), 12);
  EXPECT_EQ(cache->pages_needed(10), 0);
  write_tokens(*cache, mirror, 7, rng);
  write_tokens(*cache, mirror, 3, rng);
  EXPECT_EQ(cache->n_positions(), 10);
  EXPECT_EQ(cache->length(1, 3), 10);
  EXPECT_EQ(cache->used_slots(), 2 * 4 * 10);
  EXPECT_TRUE(cache_matches_mirror(*cache, mirror));
  // Beyond the reservation: an error and nothing written.
  const auto k = random_values(4 * 8, rng), v = random_values(4 * 16, rng);
  EXPECT_FALSE(cache->write(0, 10, k.data(), v.data(), 3).ok());
  EXPECT_FALSE(cache->write(0, 9, k.data(), v.data(), 1).ok());  // not the layer's end
  EXPECT_FALSE(cache->write(2, 10, k.data(), v.data(), 1).ok());
  EXPECT_EQ(cache->length(0, 0), 10);
  EXPECT_FALSE(cache->reserve(1001).ok());  // past capacity
  const PoolStats st = s.pool->stats();
  EXPECT_EQ(st.used_slots, 80);
  EXPECT_EQ(st.allocated_slots, 12 * 8);
  EXPECT_EQ(st.wasted_slots, 16);
}

TEST(PagedKvCache, F32StorageIsExact) {
  PoolSetup s(16, 4, 16, KvType::F32);
  auto cache = s.cache();
  KvMirror mirror(kShape, KvType::F32);
  std::mt19937 rng(2);
  ASSERT_TRUE(cache->reserve(20).ok());
  write_tokens(*cache, mirror, 20, rng);
  EXPECT_TRUE(cache_matches_mirror(*cache, mirror));
}

TEST(PagedKvCache, ReserveFailureChangesNothing) {
  PoolSetup s(4, 2, 10);
  auto a = s.cache();
  auto b = s.cache();
  ASSERT_TRUE(a->reserve(8).ok());  // 2 layers x 2 groups x 2 pages = 8 pages
  EXPECT_EQ(s.pool->free_pages(), 2);
  const Status st = b->reserve(4);  // needs 4
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("pool full"), std::string::npos) << st.message();
  EXPECT_EQ(b->pages_held(), 0);
  EXPECT_EQ(b->reserved_positions(), 0);
  EXPECT_EQ(s.pool->free_pages(), 2);
  for (int g = 0; g < 4; ++g) EXPECT_TRUE(b->group_pages(g).empty());
  EXPECT_TRUE(s.pool->check_consistency().ok());
}

TEST(PagedKvCache, DestructionReturnsEveryPage) {
  PoolSetup s(4, 2, 40);
  std::mt19937 rng(3);
  {
    auto cache = s.cache();
    KvMirror mirror(kShape, KvType::F16);
    ASSERT_TRUE(cache->reserve(30).ok());
    write_tokens(*cache, mirror, 30, rng);
    EXPECT_GT(s.pool->used_pages(), 0);
    EXPECT_GT(s.pool->stats().used_slots, 0);
  }
  EXPECT_EQ(s.pool->used_pages(), 0);
  EXPECT_EQ(s.pool->stats().used_slots, 0);
  EXPECT_TRUE(s.pool->check_consistency().ok());
}

TEST(PagedKvCache, CompactKeepsChosenEntriesAndPositions) {
  PoolSetup s(4, 2, 64);
  auto cache = s.cache();
  KvMirror mirror(kShape, KvType::F16);
  std::mt19937 rng(4);
  ASSERT_TRUE(cache->reserve(20).ok());
  write_tokens(*cache, mirror, 20, rng);
  const std::vector<int64_t> keep{0, 3, 4, 9, 17, 19};
  ASSERT_TRUE(cache->compact_head(1, 2, keep).ok());
  mirror.compact(1, 2, keep);
  ASSERT_TRUE(cache->compact_head(1, 3, std::vector<int64_t>{}).ok());
  mirror.compact(1, 3, std::vector<int64_t>{});
  EXPECT_EQ(cache->length(1, 2), 6);
  EXPECT_EQ(cache->entry_position(1, 2, 3), 9);
  EXPECT_TRUE(cache_matches_mirror(*cache, mirror));
  // Group (layer 1, heads 2-3) now needs 2 pages instead of 5.
  EXPECT_EQ(cache->group_pages(3).size(), 5u);
  EXPECT_EQ(cache->release_unused_pages(), 3);
  EXPECT_EQ(cache->group_pages(3).size(), 2u);
  EXPECT_TRUE(cache_matches_mirror(*cache, mirror));
  // Appends continue at the layer's position count after the kept entries.
  ASSERT_TRUE(cache->reserve(23).ok());
  write_tokens(*cache, mirror, 3, rng);
  EXPECT_EQ(cache->length(1, 2), 9);
  EXPECT_EQ(cache->entry_position(1, 2, 6), 20);
  EXPECT_TRUE(cache_matches_mirror(*cache, mirror));
  // Invalid keep lists change nothing.
  EXPECT_FALSE(cache->compact_head(1, 2, std::vector<int64_t>{1, 1}).ok());
  EXPECT_FALSE(cache->compact_head(1, 2, std::vector<int64_t>{3, 2}).ok());
  EXPECT_FALSE(cache->compact_head(1, 2, std::vector<int64_t>{0, 9}).ok());
  EXPECT_FALSE(cache->compact_head(1, 2, std::vector<int64_t>{-1}).ok());
  EXPECT_FALSE(cache->compact_head(1, 4, std::vector<int64_t>{0}).ok());
  EXPECT_TRUE(cache_matches_mirror(*cache, mirror));
}

// Q8_0 pages keep keys as key tiles when their runs hold 16 tokens or more (key_tiles.h):
// writes, compaction (moves inside and across tiles) and appends after it hold the same rows as
// the mirror, for pages of 16 and 32 tokens (tiled) and 8 (plain rows).
TEST(PagedKvCache, Q8KeyTilesHoldTheRowsThroughWritesAndCompaction) {
  const KvShape q8_shape{2, 4, 2, 64, 32};
  for (const int page_tokens : {8, 16, 32}) {
    PoolSetup s(page_tokens, 2, 64, KvType::Q8_0, q8_shape);
    EXPECT_EQ(s.pool->geometry().key_layout(),
              page_tokens >= 16 ? KeyLayout::Q8Tiles : KeyLayout::Rows);
    auto cache = s.cache(1000, q8_shape);
    KvMirror mirror(q8_shape, KvType::Q8_0);
    std::mt19937 rng(static_cast<uint32_t>(page_tokens));
    ASSERT_TRUE(cache->reserve(70).ok());
    write_tokens(*cache, mirror, 70, rng);
    EXPECT_TRUE(cache_matches_mirror(*cache, mirror)) << "P " << page_tokens;
    const std::vector<int64_t> keep{0, 3, 4, 9, 17, 19, 31, 32, 33, 47, 50, 69};
    ASSERT_TRUE(cache->compact_head(1, 1, keep).ok());
    mirror.compact(1, 1, keep);
    std::vector<int64_t> every_other;
    for (int64_t e = 1; e < 70; e += 2) every_other.push_back(e);
    ASSERT_TRUE(cache->compact_head(0, 0, every_other).ok());
    mirror.compact(0, 0, every_other);
    EXPECT_TRUE(cache_matches_mirror(*cache, mirror)) << "P " << page_tokens;
    ASSERT_TRUE(cache->reserve(75).ok());
    write_tokens(*cache, mirror, 5, rng);
    EXPECT_TRUE(cache_matches_mirror(*cache, mirror)) << "P " << page_tokens;
  }
}

TEST(PagedKvCache, SetHeadLengthDropsRecentEntries) {
  PoolSetup s(4, 2, 64);
  auto cache = s.cache();
  KvMirror mirror(kShape, KvType::F16);
  std::mt19937 rng(5);
  ASSERT_TRUE(cache->reserve(12).ok());
  write_tokens(*cache, mirror, 12, rng);
  ASSERT_TRUE(cache->set_head_length(0, 1, 5).ok());
  mirror.set_length(0, 1, 5);
  EXPECT_FALSE(cache->set_head_length(0, 1, 6).ok());  // cannot grow
  EXPECT_FALSE(cache->set_head_length(0, 1, -1).ok());
  EXPECT_TRUE(cache_matches_mirror(*cache, mirror));
  // Head 0 shares the group and still holds 12: nothing to release there.
  EXPECT_EQ(cache->release_unused_pages(0), 0);
  ASSERT_TRUE(cache->set_head_length(0, 0, 2).ok());
  mirror.set_length(0, 0, 2);
  EXPECT_EQ(cache->release_unused_pages(0), 1);  // ceil(5 / 4) = 2 of 3 pages kept
  ASSERT_TRUE(cache->reserve(14).ok());
  write_tokens(*cache, mirror, 2, rng);
  EXPECT_EQ(cache->entry_position(0, 1, 5), 12);
  EXPECT_TRUE(cache_matches_mirror(*cache, mirror));
}

TEST(PagedKvCache, ReleaseKeepsReservedRoom) {
  PoolSetup s(4, 2, 64);
  auto cache = s.cache();
  KvMirror mirror(kShape, KvType::F16);
  std::mt19937 rng(6);
  ASSERT_TRUE(cache->reserve(16).ok());
  write_tokens(*cache, mirror, 8, rng);
  // Heads hold 8, 8 more are reserved: 4 pages per group stay.
  EXPECT_EQ(cache->release_unused_pages(), 0);
  write_tokens(*cache, mirror, 8, rng);
  EXPECT_TRUE(cache_matches_mirror(*cache, mirror));
}

TEST(PagedKvCache, TruncateForgetsPositionsAndFreesPages) {
  PoolSetup s(4, 2, 64);
  auto cache = s.cache();
  KvMirror mirror(kShape, KvType::F16);
  std::mt19937 rng(7);
  ASSERT_TRUE(cache->reserve(20).ok());
  write_tokens(*cache, mirror, 20, rng);
  const std::vector<int64_t> keep{1, 2, 6, 11, 15, 16, 18};
  ASSERT_TRUE(cache->compact_head(0, 0, keep).ok());
  mirror.compact(0, 0, keep);
  cache->truncate(12);
  mirror.truncate(12);
  EXPECT_EQ(cache->n_positions(), 12);
  EXPECT_EQ(cache->length(0, 0), 4);  // positions 1, 2, 6, 11
  EXPECT_EQ(cache->length(0, 1), 12);
  EXPECT_TRUE(cache_matches_mirror(*cache, mirror));
  EXPECT_EQ(cache->pages_held(), 2 * 2 * 3);
  // Truncating into the kept region restarts the tail at the cut.
  cache->truncate(5);
  mirror.truncate(5);
  EXPECT_EQ(cache->length(0, 0), 2);
  EXPECT_TRUE(cache_matches_mirror(*cache, mirror));
  ASSERT_TRUE(cache->reserve(9).ok());
  write_tokens(*cache, mirror, 4, rng);
  EXPECT_EQ(cache->entry_position(0, 0, 2), 5);
  EXPECT_TRUE(cache_matches_mirror(*cache, mirror));
  cache->clear();
  EXPECT_EQ(cache->pages_held(), 0);
  EXPECT_EQ(cache->used_slots(), 0);
  EXPECT_EQ(s.pool->used_pages(), 0);
}

TEST(PagedKvCache, NonContiguousMapStoresEachHeadInItsColumn) {
  using Groups = std::vector<std::vector<std::vector<int>>>;
  PoolSetup s(4, 3, 64);
  s.map = std::make_shared<const HeadGroupMap>(
      HeadGroupMap::from_groups(4, 3, Groups{{{3, 0, 2}, {1}}, {{1, 2}, {0, 3}}}).value());
  auto cache = s.cache();
  KvMirror mirror(kShape, KvType::F16);
  std::mt19937 rng(8);
  ASSERT_TRUE(cache->reserve(9).ok());
  write_tokens(*cache, mirror, 9, rng);
  EXPECT_TRUE(cache_matches_mirror(*cache, mirror));
  // Heads of one group share their page table.
  EXPECT_EQ(cache->head_view(0, 3).pages, cache->head_view(0, 2).pages);
  EXPECT_NE(cache->head_view(0, 3).pages, cache->head_view(0, 1).pages);
  // 4 groups x 3 pages; group {1} of layer 0 uses a third of its pages.
  EXPECT_EQ(cache->pages_held(), 12);
  const PoolStats st = s.pool->stats();
  EXPECT_EQ(st.allocated_slots, 12 * 12);
  EXPECT_EQ(st.used_slots, 2 * 4 * 9);
}

}  // namespace
}  // namespace tangram
