// Key tiles (key_tiles.h): which pages hold them, the byte layout the header states, and that a
// plain Q8_0 row goes in and comes back out (and moves between slots) unchanged; through a
// head view, copy_keys gives back the rows whatever the layout, and for_each_key_tile reports
// each entry at its run's tile and token.
#include "kv/key_tiles.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kv/kv_head_view.h"
#include "kv/kv_row.h"
#include "kv/kv_test_util.h"

namespace tangram {
namespace {

// n random plain Q8_0 rows of head_dim elements.
std::vector<uint8_t> random_rows(int n, int head_dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  const size_t row = kv_row_bytes(KvType::Q8_0, head_dim);
  std::vector<uint8_t> out(static_cast<size_t>(n) * row);
  std::vector<float> x(static_cast<size_t>(head_dim));
  for (int t = 0; t < n; ++t) {
    for (float& v : x) v = u(rng);
    store_kv_row(KvType::Q8_0, x.data(), out.data() + static_cast<size_t>(t) * row, head_dim);
  }
  return out;
}

TEST(KeyTiles, Q8PagesWithRunsOf16TokensOrMoreAreTiled) {
  EXPECT_EQ(page_key_layout(KvType::Q8_0, 16), KeyLayout::Q8Tiles);
  EXPECT_EQ(page_key_layout(KvType::Q8_0, 32), KeyLayout::Q8Tiles);
  EXPECT_EQ(page_key_layout(KvType::Q8_0, 48), KeyLayout::Q8Tiles);
  EXPECT_EQ(page_key_layout(KvType::Q8_0, 8), KeyLayout::Rows);
  EXPECT_EQ(page_key_layout(KvType::Q8_0, 24), KeyLayout::Rows);
  EXPECT_EQ(page_key_layout(KvType::F16, 32), KeyLayout::Rows);
  EXPECT_EQ(page_key_layout(KvType::F32, 16), KeyLayout::Rows);
  PageGeometry g{32, 2, 64, 64, KvType::Q8_0};
  EXPECT_EQ(g.key_layout(), KeyLayout::Q8Tiles);
  g.page_tokens = 24;  // one run of 24 tokens
  EXPECT_EQ(g.key_layout(), KeyLayout::Rows);
}

TEST(KeyTiles, BytesSitWhereTheHeaderSays) {
  const int hd = 64, run = 16;
  const auto rows = random_rows(run, hd, 1);
  const size_t row = kv_row_bytes(KvType::Q8_0, hd);
  std::vector<uint8_t> tile(static_cast<size_t>(run) * row, 0);
  store_tiled_keys(rows.data(), run, tile.data(), run, 0, hd);
  for (int t = 0; t < run; ++t)
    for (int b = 0; b < hd / 32; ++b) {
      const uint8_t* block =
          rows.data() + static_cast<size_t>(t) * row + static_cast<size_t>(b) * kKvQ8BlockBytes;
      const size_t block_at = static_cast<size_t>(b) * static_cast<size_t>(run) * kKvQ8BlockBytes;
      EXPECT_EQ(std::memcmp(tile.data() + block_at + static_cast<size_t>(run) * 32 +
                                static_cast<size_t>(t) * 2,
                            block, 2),
                0)
          << "scale of token " << t;
      for (int i = 0; i < 32; ++i) {
        const size_t at = block_at + static_cast<size_t>(i / 4) * run * 4 +
                          static_cast<size_t>(t) * 4 + static_cast<size_t>(i % 4);
        ASSERT_EQ(tile[at], static_cast<uint8_t>(block[2 + i] ^ 0x80))
            << "token " << t << " block " << b << " element " << i;
      }
    }
}

TEST(KeyTiles, RowsRoundTripAndMoveUnchanged) {
  for (const int run : {16, 32, 64})
    for (const int hd : {32, 96, 128}) {
      const size_t row = kv_row_bytes(KvType::Q8_0, hd);
      const auto rows = random_rows(run, hd, static_cast<uint32_t>(run + hd));
      std::vector<uint8_t> tile(static_cast<size_t>(run) * row, 0xEE), other(tile.size(), 0x11);
      for (int t = 0; t < run; ++t)
        store_tiled_keys(rows.data() + static_cast<size_t>(t) * row, 1, tile.data(), run, t, hd);
      std::vector<uint8_t> back(row);
      for (int t = 0; t < run; ++t) {
        load_tiled_keys(tile.data(), run, t, 1, back.data(), hd);
        ASSERT_EQ(std::memcmp(back.data(), rows.data() + static_cast<size_t>(t) * row, row), 0)
            << "run " << run << " token " << t;
      }
      // Token t to token run - 1 - t of another tile, and token 5 onto token 2 of the same one.
      for (int t = 0; t < run; ++t)
        move_tiled_key(tile.data(), t, other.data(), run - 1 - t, run, hd);
      move_tiled_key(tile.data(), 5, tile.data(), 2, run, hd);
      for (int t = 0; t < run; ++t) {
        load_tiled_keys(other.data(), run, run - 1 - t, 1, back.data(), hd);
        ASSERT_EQ(std::memcmp(back.data(), rows.data() + static_cast<size_t>(t) * row, row), 0)
            << "moved token " << t;
        load_tiled_keys(tile.data(), run, t, 1, back.data(), hd);
        const int want = t == 2 ? 5 : t;
        ASSERT_EQ(std::memcmp(back.data(), rows.data() + static_cast<size_t>(want) * row, row), 0)
            << "token " << t;
      }
    }
}

// Any stretch of tokens stored at once lands where storing its tokens one by one puts them, and
// reads back at once as the same rows; the tile's other tokens are left alone.
TEST(KeyTiles, StretchesStoreAndLoadAsTheirTokensOneByOne) {
  const int hd = 96, run = 32;
  const size_t row = kv_row_bytes(KvType::Q8_0, hd);
  const auto rows = random_rows(run, hd, 21);
  for (const auto& [first, count] :
       {std::pair<int, int>{0, 32}, {0, 1}, {3, 13}, {16, 16}, {31, 1}, {7, 0}}) {
    std::vector<uint8_t> at_once(static_cast<size_t>(run) * row, 0x5A), one_by_one(at_once);
    const uint8_t* from = rows.data() + static_cast<size_t>(first) * row;
    store_tiled_keys(from, count, at_once.data(), run, first, hd);
    for (int t = 0; t < count; ++t)
      store_tiled_keys(from + static_cast<size_t>(t) * row, 1, one_by_one.data(), run, first + t,
                       hd);
    ASSERT_EQ(at_once, one_by_one) << "tokens " << first << " + " << count;
    std::vector<uint8_t> back(static_cast<size_t>(count) * row + 1,
                              0xC3);  // one guard byte past the rows
    load_tiled_keys(at_once.data(), run, first, count, back.data(), hd);
    EXPECT_TRUE(std::equal(back.begin(), back.end() - 1, from))
        << "tokens " << first << " + " << count;
    EXPECT_EQ(back.back(), 0xC3) << "written past the rows";
  }
}

// A paged head of tiled keys (pages of two runs, in scrambled order): copy_keys gives the rows
// back for any range, and for_each_key_tile reports each entry at its run's tile and token.
TEST(KeyTiles, HeadViewCopiesTiledKeysBackAsRowsAndReportsTheirTiles) {
  const int hd = 64, run = 16, page_tokens = 32;
  const size_t kr = kv_row_bytes(KvType::Q8_0, hd), vr = 40;
  const std::vector<PageId> pages = {3, 0, 2, 1};
  const int64_t length = 100;
  const auto rows = random_rows(static_cast<int>(length), hd, 9);
  const size_t run_bytes = static_cast<size_t>(run) * (kr + vr);
  const size_t page_bytes = 2 * run_bytes + 64;
  std::vector<uint8_t> arena(page_bytes * pages.size(), 0);
  const KvHeadView view = testing::tiled_head_view(
      {arena.data(), pages.data(), page_tokens, page_bytes, run, hd, vr, length});
  auto tile_of = [&](int64_t e) {
    const int64_t s = e % page_tokens;
    return arena.data() +
           static_cast<size_t>(pages[static_cast<size_t>(e / page_tokens)]) * page_bytes +
           static_cast<size_t>(s / run) * run_bytes;
  };
  for (int64_t e = 0; e < length; ++e)
    store_tiled_keys(rows.data() + static_cast<size_t>(e) * kr, 1, tile_of(e), run,
                     e % page_tokens % run, hd);
  for (const auto& [begin, end] :
       {std::pair<int64_t, int64_t>{0, 100}, {5, 37}, {16, 17}, {31, 64}, {40, 40}}) {
    std::vector<uint8_t> got(static_cast<size_t>(end - begin) * kr);
    view.copy_keys(begin, end, got.data());
    EXPECT_TRUE(
        std::equal(got.begin(), got.end(),
                   rows.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(begin) * kr)))
        << "entries " << begin << ".." << end;  // (not memcmp: the empty range has no data pointer)
    int64_t next = begin;
    view.for_each_key_tile(begin, end,
                           [&](int64_t first, const uint8_t* tile, int64_t token, int64_t count) {
                             EXPECT_EQ(first, next);
                             EXPECT_EQ(tile, tile_of(first));
                             EXPECT_EQ(token, first % page_tokens % run);
                             EXPECT_LE(token + count, run);
                             next = first + count;
                           });
    EXPECT_EQ(next, end);
    view.for_each_run(begin, end, [&](int64_t, const uint8_t* k, const uint8_t*, int64_t) {
      EXPECT_EQ(k, nullptr) << "tiled keys have no row to point at";
    });
  }
}

}  // namespace
}  // namespace tangram
