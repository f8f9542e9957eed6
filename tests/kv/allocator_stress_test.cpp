// Randomised allocator stress: many sequences share one small pool and go through thousands of
// create / grow / reserve / compact / shrink / release / truncate / destroy operations, pool-full
// errors included. After every operation: no page is owned twice, every owned page is in use,
// the pool's counts match the sequences', slot accounting adds up, and every group holds pages
// for its longest head (groups may span layers). Periodically every stored row is compared with
// a mirror. At the end every page is back in the pool.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "kv/kv_test_util.h"
#include "kv/paged_kv_cache.h"

namespace tangram {
namespace {

using testing::cache_matches_mirror;
using testing::KvMirror;
using testing::random_values;

struct Seq {
  std::unique_ptr<PagedKvCache> cache;
  std::unique_ptr<KvMirror> mirror;
};

// Everything a failed call must leave untouched.
struct Snapshot {
  std::vector<std::vector<PageId>> tables;
  std::vector<int64_t> lengths;
  int64_t pages_held, used_slots, reserved, free_pages;

  Snapshot(const PagedKvCache& c, const BlockPool& pool)
      : pages_held(c.pages_held()),
        used_slots(c.used_slots()),
        reserved(c.reserved_positions()),
        free_pages(pool.free_pages()) {
    const KvShape& s = c.shape();
    for (int g = 0; g < c.head_groups().total_groups(); ++g) {
      const auto t = c.group_pages(g);
      tables.emplace_back(t.begin(), t.end());
    }
    for (int l = 0; l < s.n_layers; ++l)
      for (int h = 0; h < s.n_kv_head; ++h) lengths.push_back(c.length(l, h));
  }
  bool operator==(const Snapshot&) const = default;
};

void check_invariants(const BlockPool& pool, const std::vector<std::optional<Seq>>& seqs,
                      int step) {
  SCOPED_TRACE(::testing::Message() << "after operation " << step);
  ASSERT_TRUE(pool.check_consistency().ok()) << pool.check_consistency().message();
  std::vector<int> owner(static_cast<size_t>(pool.total_pages()), -1);
  const int64_t p = pool.geometry().page_tokens;
  int64_t pages = 0, used_slots = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (!seqs[i]) continue;
    const PagedKvCache& c = *seqs[i]->cache;
    const KvShape& s = c.shape();
    int64_t held = 0, lengths = 0;
    for (int g = 0; g < c.head_groups().total_groups(); ++g) {
      const auto table = c.group_pages(g);
      for (const PageId id : table) {
        ASSERT_TRUE(pool.in_use(id)) << "page " << id << " owned but free";
        ASSERT_EQ(owner[static_cast<size_t>(id)], -1) << "page " << id << " owned twice";
        owner[static_cast<size_t>(id)] = static_cast<int>(i);
      }
      int64_t longest = 0;
      for (const int f : c.head_groups().members(g))
        longest = std::max(
            longest, c.length(c.head_groups().layer_of_head(f), c.head_groups().kv_head_of(f)));
      ASSERT_GE(static_cast<int64_t>(table.size()) * p, longest) << "group lacks pages";
      held += static_cast<int64_t>(table.size());
    }
    for (int l = 0; l < s.n_layers; ++l)
      for (int h = 0; h < s.n_kv_head; ++h) lengths += c.length(l, h);
    ASSERT_EQ(held, c.pages_held());
    ASSERT_EQ(lengths, c.used_slots());
    ASSERT_LE(c.used_slots(), c.allocated_slots());
    pages += held;
    used_slots += lengths;
  }
  const PoolStats st = pool.stats();
  ASSERT_EQ(st.used_pages, pages) << "pages leaked or lost";
  ASSERT_EQ(st.used_slots, used_slots);
  ASSERT_EQ(st.wasted_slots, st.allocated_slots - used_slots);
  ASSERT_GE(st.wasted_slots, 0);
}

void run_stress(int page_tokens, int group, int64_t n_pages,
                std::shared_ptr<const HeadGroupMap> map, uint32_t seed, int n_ops) {
  const KvShape shape{2, 12, 6, 8, 8};
  PageGeometry geo;
  geo.page_tokens = page_tokens;
  geo.group_size = group;
  geo.head_dim = shape.head_dim;
  geo.head_dim_v = shape.head_dim_v;
  geo.type = KvType::F16;
  auto pool =
      std::move(BlockPool::create(geo, static_cast<size_t>(n_pages) * geo.page_bytes()).value());
  if (!map)
    map = std::make_shared<const HeadGroupMap>(HeadGroupMap::contiguous(2, 6, group).value());
  std::mt19937 rng(seed);
  std::vector<std::optional<Seq>> seqs(10);
  int pool_full = 0, compactions = 0, truncations = 0;

  for (int step = 0; step < n_ops; ++step) {
    auto& slot = seqs[rng() % seqs.size()];
    const int op = static_cast<int>(rng() % 9);
    if (!slot) {
      slot = Seq{std::move(PagedKvCache::create(shape, 400, *pool, map).value()),
                 std::make_unique<KvMirror>(shape, KvType::F16)};
    } else if (op == 0 && rng() % 4 == 0) {
      slot.reset();        // destruction returns the pages
    } else if (op <= 3) {  // grow by a chunk or a token
      PagedKvCache& c = *slot->cache;
      const int64_t n = op == 1 ? 1 + static_cast<int64_t>(rng() % 24) : 1;
      const int64_t target = std::min<int64_t>(c.n_positions() + n, c.capacity());
      const Snapshot before(c, *pool);
      const Status st = c.reserve(target);
      if (!st.ok()) {
        ++pool_full;
        ASSERT_TRUE(Snapshot(c, *pool) == before) << "failed reserve changed state";
      } else {
        const int64_t add = target - c.n_positions();
        for (int l = 0; l < shape.n_layers; ++l) {
          const auto k = random_values(static_cast<size_t>(add * 6 * 8), rng);
          const auto v = random_values(static_cast<size_t>(add * 6 * 8), rng);
          ASSERT_TRUE(c.write(l, slot->mirror->positions(l), k.data(), v.data(), add).ok());
          slot->mirror->write(l, k.data(), v.data(), add);
          // Mid-step release: a group spanning layers keeps what its later layers still need.
          if (rng() % 3 == 0) c.release_unused_pages(l);
        }
      }
    } else if (op == 4) {  // reserve ahead without writing
      PagedKvCache& c = *slot->cache;
      const Snapshot before(c, *pool);
      if (!c.reserve(c.n_positions() + 1 + static_cast<int64_t>(rng() % 40)).ok()) {
        ++pool_full;
        ASSERT_TRUE(Snapshot(c, *pool) == before) << "failed reserve changed state";
      }
    } else if (op == 5) {  // compact one head to a random subset
      PagedKvCache& c = *slot->cache;
      const int l = static_cast<int>(rng() % 2), h = static_cast<int>(rng() % 6);
      std::bernoulli_distribution coin(0.1 + 0.8 * static_cast<double>(rng() % 100) / 100.0);
      std::vector<int64_t> keep;
      for (int64_t e = 0; e < c.length(l, h); ++e)
        if (coin(rng)) keep.push_back(e);
      ASSERT_TRUE(c.compact_head(l, h, keep).ok());
      slot->mirror->compact(l, h, keep);
      ++compactions;
    } else if (op == 6) {  // drop a head's most recent entries
      PagedKvCache& c = *slot->cache;
      const int l = static_cast<int>(rng() % 2), h = static_cast<int>(rng() % 6);
      const int64_t len =
          c.length(l, h) == 0
              ? 0
              : static_cast<int64_t>(rng() % static_cast<uint64_t>(c.length(l, h) + 1));
      ASSERT_TRUE(c.set_head_length(l, h, len).ok());
      slot->mirror->set_length(l, h, len);
    } else if (op == 7) {
      if (rng() % 2) {
        slot->cache->release_unused_pages(static_cast<int>(rng() % 2));
      } else {
        slot->cache->release_unused_pages();
      }
    } else {  // truncate to a random earlier position
      PagedKvCache& c = *slot->cache;
      const int64_t n = static_cast<int64_t>(rng() % static_cast<uint64_t>(c.n_positions() + 1));
      c.truncate(n);
      slot->mirror->truncate(n);
      ++truncations;
    }
    check_invariants(*pool, seqs, step);
    if (::testing::Test::HasFatalFailure()) return;
    if (step % 97 == 0) {
      for (const auto& s : seqs) {
        if (s) {
          ASSERT_TRUE(cache_matches_mirror(*s->cache, *s->mirror)) << "step " << step;
        }
      }
    }
  }
  for (const auto& s : seqs) {
    if (s) {
      ASSERT_TRUE(cache_matches_mirror(*s->cache, *s->mirror));
    }
  }
  EXPECT_GT(pool_full, 10) << "the pool never ran full: the test lost its edge";
  EXPECT_GT(compactions, 100);
  EXPECT_GT(truncations, 100);
  for (auto& s : seqs) s.reset();
  EXPECT_EQ(pool->used_pages(), 0);
  EXPECT_EQ(pool->free_pages(), pool->total_pages());
  EXPECT_EQ(pool->stats().used_slots, 0);
  EXPECT_TRUE(pool->check_consistency().ok());
}

TEST(AllocatorStress, ContiguousGroupsOfFour) { run_stress(4, 4, 300, nullptr, 1, 3000); }
TEST(AllocatorStress, SingleHeadPages) { run_stress(2, 1, 1200, nullptr, 2, 3000); }
TEST(AllocatorStress, UnifiedPages) { run_stress(8, 6, 70, nullptr, 3, 3000); }
TEST(AllocatorStress, NonContiguousMap) {
  using Groups = std::vector<std::vector<std::vector<int>>>;
  auto map = std::make_shared<const HeadGroupMap>(
      HeadGroupMap::from_groups(6, 3, Groups{{{5, 0, 3}, {1}, {4, 2}}, {{2, 1, 0}, {3, 4, 5}}})
          .value());
  run_stress(4, 3, 400, map, 4, 3000);
}
TEST(AllocatorStress, CrossLayerMap) {
  // Groups mixing both layers' heads, one group shorter than G.
  auto map = std::make_shared<const HeadGroupMap>(
      HeadGroupMap::from_flat_groups(2, 6, 4, {{0, 7, 3, 11}, {6, 1, 8}, {2, 9, 10, 4}, {5}})
          .value());
  ASSERT_FALSE(map->per_layer());
  run_stress(4, 4, 300, map, 5, 3000);
}

}  // namespace
}  // namespace tangram
