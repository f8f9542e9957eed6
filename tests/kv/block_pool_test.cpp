#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

namespace tangram {
namespace {

PageGeometry geometry(int p, int g, int hd, KvType type = KvType::F16) {
  PageGeometry geo;
  geo.page_tokens = p;
  geo.group_size = g;
  geo.head_dim = hd;
  geo.head_dim_v = hd;
  geo.type = type;
  return geo;
}

TEST(PageGeometry, SizesFollowLayout) {
  const PageGeometry g = geometry(16, 4, 128);
  EXPECT_EQ(g.key_row_bytes(), 256u);
  EXPECT_EQ(g.column_bytes(), 2u * 16 * 256);    // one head: 16 key rows, 16 value rows
  EXPECT_EQ(g.page_bytes(), 2u * 4 * 16 * 256);  // 32 KiB
  EXPECT_EQ(g.key_offset(2, 3), 2u * 8192 + 3 * 256);
  EXPECT_EQ(g.value_offset(2, 3), 2u * 8192 + 16 * 256 + 3 * 256);
  EXPECT_EQ(g.slots_per_page(), 64);
  const PageGeometry f = geometry(16, 4, 128, KvType::F32);
  EXPECT_EQ(f.page_bytes(), 2 * g.page_bytes());
  // Odd sizes are padded to a cache line.
  PageGeometry odd = geometry(1, 1, 3, KvType::F16);
  odd.head_dim_v = 5;
  EXPECT_EQ(odd.column_bytes(), 16u);
  EXPECT_EQ(odd.value_offset(0, 0), 6u);
  EXPECT_EQ(odd.page_bytes(), 64u);
}

// Pages of a multiple of 32 tokens cut each column into runs of 32 slots, keys then values,
// so one attention block reads one run; other page sizes keep one run per column.
TEST(PageGeometry, ColumnsOfLargePagesAreRunsOf32Slots) {
  const PageGeometry g = geometry(64, 4, 128);
  EXPECT_EQ(g.run_tokens(), 32);
  EXPECT_EQ(g.run_bytes(), 2u * 32 * 256);
  EXPECT_EQ(g.column_bytes(), 2u * 64 * 256);
  EXPECT_EQ(g.page_bytes(), 4 * g.column_bytes());
  const size_t col = 2u * 64 * 256, run = 2u * 32 * 256;
  EXPECT_EQ(g.key_offset(1, 31), col + 31 * 256);
  EXPECT_EQ(g.value_offset(1, 31), col + 32 * 256 + 31 * 256);
  EXPECT_EQ(g.key_offset(1, 32), col + run);
  EXPECT_EQ(g.value_offset(3, 63), 3 * col + run + 32 * 256 + 31 * 256);
  EXPECT_EQ(geometry(32, 4, 128).run_tokens(), 32);
  EXPECT_EQ(geometry(48, 4, 128).run_tokens(), 48);
  EXPECT_EQ(geometry(16, 4, 128).run_tokens(), 16);
  EXPECT_EQ(geometry(1, 4, 128).run_tokens(), 1);
}

// Every (column, slot)'s key and value rows lie inside the page and no two rows share a byte,
// for every page size and row type (odd row sizes included).
TEST(PageGeometry, RowsTileThePageWithoutOverlapAtEveryPageSize) {
  for (const KvType type : {KvType::F32, KvType::F16, KvType::Q8_0})
    for (const int p : {1, 5, 16, 32, 48, 64, 96, 128}) {
      PageGeometry g = geometry(p, 3, type == KvType::Q8_0 ? 64 : 6, type);
      g.head_dim_v = type == KvType::Q8_0 ? 32 : 5;
      ASSERT_TRUE(g.validate().ok());
      std::vector<int> owner(g.page_bytes(), 0);
      auto mark = [&](size_t at, size_t bytes) {
        ASSERT_LE(at + bytes, g.page_bytes()) << "P " << p;
        for (size_t b = at; b < at + bytes; ++b) ++owner[b];
      };
      for (int c = 0; c < g.group_size; ++c)
        for (int64_t slot = 0; slot < p; ++slot) {
          mark(g.key_offset(c, slot), g.key_row_bytes());
          mark(g.value_offset(c, slot), g.value_row_bytes());
        }
      const auto used = static_cast<size_t>(g.group_size) * static_cast<size_t>(p) *
                        (g.key_row_bytes() + g.value_row_bytes());
      EXPECT_EQ(static_cast<size_t>(std::count(owner.begin(), owner.end(), 1)), used) << "P " << p;
      EXPECT_EQ(std::count_if(owner.begin(), owner.end(), [](int n) { return n > 1; }), 0)
          << "P " << p;
    }
}

TEST(PageGeometry, RejectsNonPositiveAndHugePages) {
  EXPECT_FALSE(geometry(0, 4, 128).validate().ok());
  EXPECT_FALSE(geometry(16, 0, 128).validate().ok());
  EXPECT_FALSE(geometry(16, 4, -1).validate().ok());
  EXPECT_FALSE(geometry(1 << 20, 1 << 10, 1 << 10).validate().ok());
  EXPECT_TRUE(geometry(16, 4, 128).validate().ok());
}

TEST(BlockPool, CutsArenaIntoPages) {
  const PageGeometry g = geometry(16, 4, 128);
  auto pool = BlockPool::create(g, size_t{10} * g.page_bytes() + 100);
  ASSERT_TRUE(pool.ok()) << pool.message();
  EXPECT_EQ((*pool)->total_pages(), 10);
  EXPECT_EQ((*pool)->free_pages(), 10);
  EXPECT_EQ((*pool)->used_pages(), 0);
  // Pages are disjoint, cache-line aligned slices of one arena.
  const uint8_t* base = (*pool)->page_data(0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(base) % 4096, 0u);
  EXPECT_EQ((*pool)->page_data(3) - base, static_cast<std::ptrdiff_t>(3 * g.page_bytes()));
}

TEST(BlockPool, RejectsArenaSmallerThanAPage) {
  const PageGeometry g = geometry(16, 4, 128);
  auto pool = BlockPool::create(g, g.page_bytes() - 1);
  ASSERT_FALSE(pool.ok());
  EXPECT_NE(pool.message().find("no page"), std::string::npos) << pool.message();
  EXPECT_FALSE(BlockPool::create(geometry(0, 4, 128), 1 << 20).ok());
}

TEST(BlockPool, AllocateAndReleaseRoundTrip) {
  const PageGeometry g = geometry(4, 2, 8);
  auto created = BlockPool::create(g, 8 * g.page_bytes());
  ASSERT_TRUE(created.ok());
  BlockPool& pool = **created;
  std::vector<PageId> a, b;
  ASSERT_TRUE(pool.allocate(3, a).ok());
  ASSERT_TRUE(pool.allocate(5, b).ok());
  EXPECT_EQ(pool.free_pages(), 0);
  std::set<PageId> all(a.begin(), a.end());
  all.insert(b.begin(), b.end());
  EXPECT_EQ(all.size(), 8u);  // every page handed out once
  for (PageId id : all) EXPECT_TRUE(pool.in_use(id));
  ASSERT_TRUE(pool.release(a).ok());
  EXPECT_EQ(pool.free_pages(), 3);
  for (PageId id : a) EXPECT_FALSE(pool.in_use(id));
  ASSERT_TRUE(pool.check_consistency().ok());
  ASSERT_TRUE(pool.release(b).ok());
  EXPECT_EQ(pool.free_pages(), 8);
  EXPECT_TRUE(pool.check_consistency().ok());
}

TEST(BlockPool, PoolFullIsAnErrorAndChangesNothing) {
  const PageGeometry g = geometry(4, 2, 8);
  auto created = BlockPool::create(g, 4 * g.page_bytes());
  ASSERT_TRUE(created.ok());
  BlockPool& pool = **created;
  std::vector<PageId> held;
  ASSERT_TRUE(pool.allocate(3, held).ok());
  std::vector<PageId> more{42};  // existing contents must survive a failed call
  const Status s = pool.allocate(2, more);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("pool full"), std::string::npos) << s.message();
  EXPECT_EQ(more, std::vector<PageId>{42});
  EXPECT_EQ(pool.free_pages(), 1);
  EXPECT_FALSE(pool.allocate(-1, more).ok());
  EXPECT_TRUE(pool.allocate(0, more).ok());
  EXPECT_TRUE(pool.check_consistency().ok());
}

TEST(BlockPool, BadReleaseIsAnErrorAndReleasesNothing) {
  const PageGeometry g = geometry(4, 2, 8);
  auto created = BlockPool::create(g, 6 * g.page_bytes());
  ASSERT_TRUE(created.ok());
  BlockPool& pool = **created;
  std::vector<PageId> held;
  ASSERT_TRUE(pool.allocate(4, held).ok());
  const std::vector<PageId> dup{held[0], held[1], held[0]};
  EXPECT_FALSE(pool.release(dup).ok());
  const std::vector<PageId> out_of_range{held[2], 6};
  EXPECT_FALSE(pool.release(out_of_range).ok());
  const std::vector<PageId> negative{held[3], -1};
  EXPECT_FALSE(pool.release(negative).ok());
  EXPECT_EQ(pool.free_pages(), 2);
  for (PageId id : held) EXPECT_TRUE(pool.in_use(id));
  ASSERT_TRUE(pool.release(std::vector<PageId>{held[0]}).ok());
  EXPECT_FALSE(pool.release(std::vector<PageId>{held[0]}).ok());  // double free
  EXPECT_EQ(pool.free_pages(), 3);
  EXPECT_TRUE(pool.check_consistency().ok());
}

TEST(BlockPool, SlotAccountingShowsWaste) {
  const PageGeometry g = geometry(16, 4, 8);
  auto created = BlockPool::create(g, 10 * g.page_bytes());
  ASSERT_TRUE(created.ok());
  BlockPool& pool = **created;
  std::vector<PageId> held;
  ASSERT_TRUE(pool.allocate(2, held).ok());
  pool.add_used_slots(100);
  PoolStats s = pool.stats();
  EXPECT_EQ(s.used_pages, 2);
  EXPECT_EQ(s.free_pages, 8);
  EXPECT_EQ(s.allocated_slots, 128);
  EXPECT_EQ(s.used_slots, 100);
  EXPECT_EQ(s.wasted_slots, 28);
  EXPECT_DOUBLE_EQ(s.waste_fraction(), 28.0 / 128.0);
  pool.add_used_slots(-100);
  EXPECT_EQ(pool.stats().wasted_slots, 128);
}

}  // namespace
}  // namespace tangram
