// PagedKvCache::restore: an empty cache takes a whole saved state at once and then equals the cache
// it came from; inconsistent states, non-empty caches and short pools are refused with nothing
// changed. Also a session blob whose checksums are right but whose positions are not (a blob
// written by a buggy or hostile writer) is refused by decode_session.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include <xxhash.h>

#include "store/session_codec.h"
#include "store/session_test_util.h"

namespace tangram {
namespace {

using testing::contiguous_map;
using testing::kSessionShape;
using testing::make_pool;
using testing::ragged;
using testing::same_cache;

constexpr int kHeads = kSessionShape.n_layers * kSessionShape.n_kv_head;

// The state of every head of a cache, with its rows packed: what restore() takes.
struct Saved {
  std::vector<std::vector<int32_t>> kept;    // [heads][n_kept]
  std::vector<std::vector<uint8_t>> keys;    // [heads][length * key_row_bytes]
  std::vector<std::vector<uint8_t>> values;  // [heads][length * value_row_bytes]
  std::vector<PagedKvCache::HeadRestore> heads;
};

Saved save(const PagedKvCache& c) {
  Saved s;
  s.kept.resize(kHeads);
  s.keys.resize(kHeads);
  s.values.resize(kHeads);
  s.heads.resize(kHeads);
  for (int l = 0; l < kSessionShape.n_layers; ++l)
    for (int h = 0; h < kSessionShape.n_kv_head; ++h) {
      const size_t i = static_cast<size_t>(l * kSessionShape.n_kv_head + h);
      const KvHeadView v = c.head_view(l, h);
      s.kept[i].assign(v.kept_pos, v.kept_pos + v.n_kept);
      s.keys[i].resize(static_cast<size_t>(v.length) * v.k_row_bytes);
      v.copy_keys(0, v.length, s.keys[i].data());
      v.for_each_run(0, v.length, [&](int64_t, const uint8_t*, const uint8_t* val, int64_t n) {
        s.values[i].insert(s.values[i].end(), val, val + static_cast<size_t>(n) * v.v_row_bytes);
      });
      s.heads[i] = {v.length, s.kept[i], v.tail_pos0, s.keys[i].data(), s.values[i].data()};
    }
  return s;
}

TEST(PagedKvCacheRestore, AnEmptyCacheTakesTheSavedState) {
  auto r = ragged(KvType::F32, contiguous_map(2), 4, 1);
  Saved s = save(*r.cache);
  auto pool = make_pool(KvType::F32, 4, 2, 256);
  auto c = PagedKvCache::create(kSessionShape, 512, *pool, r.map).value();
  ASSERT_TRUE(c->restore(r.cache->n_positions(), s.heads).ok());
  EXPECT_TRUE(same_cache(*r.cache, *c));
  EXPECT_EQ(c->pages_held(), pool->used_pages());
  EXPECT_EQ(pool->stats().used_slots, c->used_slots());
  // Not twice.
  EXPECT_FALSE(c->restore(r.cache->n_positions(), s.heads).ok());
}

TEST(PagedKvCacheRestore, RefusesInconsistentStatesAndChangesNothing) {
  auto r = ragged(KvType::F16, contiguous_map(2), 4, 1);  // layer 0 head 0 compacted
  const int64_t n = r.cache->n_positions();
  auto pool = make_pool(KvType::F16, 4, 2, 256);
  auto c = PagedKvCache::create(kSessionShape, 512, *pool, r.map).value();
  auto refused = [&](const std::vector<PagedKvCache::HeadRestore>& heads, int64_t positions,
                     const char* what) {
    const Status st = c->restore(positions, heads);
    EXPECT_FALSE(st.ok()) << what;
    EXPECT_EQ(pool->used_pages(), 0) << what;
    EXPECT_EQ(c->n_positions(), 0) << what;
    EXPECT_EQ(pool->stats().used_slots, 0) << what;
  };
  Saved s = save(*r.cache);
  ASSERT_GE(s.kept[0].size(), 2u);
  refused(s.heads, 600, "positions past capacity");
  refused(std::vector<PagedKvCache::HeadRestore>(s.heads.begin(), s.heads.end() - 1), n,
          "a head missing");
  refused(s.heads, n - 1, "entries past the positions");
  {
    Saved t = save(*r.cache);
    std::swap(t.kept[0][0], t.kept[0][1]);
    refused(t.heads, n, "positions not ascending");
  }
  {
    Saved t = save(*r.cache);
    t.heads[0].tail_pos0 = t.kept[0].back();
    refused(t.heads, n, "kept position not below the tail");
  }
  {
    Saved t = save(*r.cache);
    t.heads[0].length = static_cast<int64_t>(t.kept[0].size()) - 1;
    refused(t.heads, n, "fewer entries than kept positions");
  }
  {
    Saved t = save(*r.cache);
    t.kept[0][0] = -3;
    refused(t.heads, n, "a negative position");
  }
  {
    Saved t = save(*r.cache);
    t.heads[2].keys = nullptr;
    refused(t.heads, n, "no rows");
  }
  // A pool too small.
  auto tiny = make_pool(KvType::F16, 4, 2, testing::pages_for_entries(*r.cache) - 1);
  auto d = PagedKvCache::create(kSessionShape, 512, *tiny, r.map).value();
  const Status st = d->restore(n, s.heads);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("pool has"), std::string::npos) << st.message();
  EXPECT_EQ(tiny->used_pages(), 0);
  // And a non-empty cache.
  std::mt19937 rng(1);
  testing::write_positions(*c, 3, rng);
  EXPECT_FALSE(c->restore(n, s.heads).ok());
  EXPECT_EQ(c->n_positions(), 3);
}

// Decode refuses a blob with valid checksums but swapped positions in layer 0 group 0's first
// head (re-checksummed after the edit, as a buggy writer would produce).
TEST(PagedKvCacheRestore, DecodeRefusesValidlyChecksummedBadPositions) {
  auto r = ragged(KvType::F16, contiguous_map(2), 4, 1);
  const SessionFingerprint fp = testing::fingerprint_of(KvType::F16, *r.map);
  std::string blob = encode_session(*r.cache, r.tokens, fp).value();
  const size_t block = 88 + r.tokens.size() * 4 + 8;  // first group block
  uint64_t payload = 0;
  std::memcpy(&payload, blob.data() + block + 8, sizeof(payload));
  const size_t kept_at = block + 16 + 32;  // layer 0 head 0: kept_pos[0], kept_pos[1]
  int64_t n_kept = 0;
  std::memcpy(&n_kept, blob.data() + block + 16 + 16, sizeof(n_kept));  // after layer, head, length
  ASSERT_GE(n_kept, 2);
  std::swap_ranges(blob.begin() + static_cast<std::ptrdiff_t>(kept_at),
                   blob.begin() + static_cast<std::ptrdiff_t>(kept_at + 4),
                   blob.begin() + static_cast<std::ptrdiff_t>(kept_at + 4));
  const uint64_t sum = XXH3_64bits(blob.data() + block, 16 + payload);
  std::memcpy(blob.data() + block + 16 + payload, &sum, sizeof(sum));
  auto pool = make_pool(KvType::F16, 4, 2, 256);
  auto got = decode_session(blob, fp, *pool, r.map, kSessionShape, 512);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.message().find("layer 0 head 0 positions are not strictly ascending"),
            std::string::npos)
      << got.message();
  EXPECT_EQ(pool->used_pages(), 0);
}

}  // namespace
}  // namespace tangram
