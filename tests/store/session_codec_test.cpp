// The session codec on ragged caches built by hand (writes, per-head compaction, shortened heads,
// emptied heads, appends after compaction): round trips restore the same entries and attention
// bit for bit, in F16, F32 and Q8_0 and under several head-group maps and page sizes; mismatched
// fingerprints and shapes are refused with their reason; every truncation and every byte flip of
// a small blob is refused, leaving the pool untouched; a pool too small is refused.
#include "store/session_codec.h"

#include <gtest/gtest.h>

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>

#include "kv/kv_test_util.h"
#include "store/session_test_util.h"

namespace tangram {
namespace {

using testing::clustered_map;
using testing::contiguous_map;
using testing::cross_layer_map;
using testing::fingerprint_of;
using testing::kSessionShape;
using testing::make_pool;
using testing::Ragged;
using testing::ragged;
using testing::random_values;
using testing::same_attention;
using testing::same_cache;
using testing::write_positions;

struct CodecCase {
  KvType type;
  int map;  // 0: contiguous 2, 1: unified 4, 2: clustered, 3: groups across layers
  int page_tokens;
};

class SessionRoundTrip : public ::testing::TestWithParam<CodecCase> {};

TEST_P(SessionRoundTrip, RestoresTheSameEntriesAndAttentionAndKeepsWorking) {
  const CodecCase c = GetParam();
  auto map = c.map == 0   ? contiguous_map(2)
             : c.map == 1 ? contiguous_map(4)
             : c.map == 2 ? clustered_map()
                          : cross_layer_map();
  ThreadPool threads(2);
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    Ragged r = ragged(c.type, map, c.page_tokens, seed);
    const SessionFingerprint fp = fingerprint_of(c.type, *map);
    auto blob = encode_session(*r.cache, r.tokens, fp);
    ASSERT_TRUE(blob.ok()) << blob.message();
    EXPECT_EQ(blob->size(), encoded_session_bytes(*r.cache));
    auto pool = make_pool(c.type, c.page_tokens, 4, 256);
    auto got = decode_session(*blob, fp, *pool, map, testing::session_shape(c.type), 512);
    ASSERT_TRUE(got.ok()) << got.message();
    EXPECT_EQ(got->tokens, r.tokens);
    EXPECT_TRUE(same_cache(*r.cache, *got->cache));
    EXPECT_EQ(got->cache->pages_held(), testing::pages_for_entries(*r.cache));
    EXPECT_EQ(pool->used_pages(), got->cache->pages_held());
    EXPECT_TRUE(pool->check_consistency().ok());
    EXPECT_TRUE(same_attention(*r.cache, *got->cache, seed, threads));
    // Both continue identically: the restored tail positions are right.
    std::mt19937 ra(99 + seed), rb(99 + seed);
    write_positions(*r.cache, 5, ra);
    write_positions(*got->cache, 5, rb);
    EXPECT_TRUE(same_cache(*r.cache, *got->cache));
    EXPECT_TRUE(same_attention(*r.cache, *got->cache, seed + 10, threads));
    // Encoding the restored cache gives the same blob (with the new positions on both sides).
    const std::vector<int32_t> longer(static_cast<size_t>(r.cache->n_positions()), 7);
    auto again_a = encode_session(*r.cache, longer, fp);
    auto again_b = encode_session(*got->cache, longer, fp);
    ASSERT_TRUE(again_a.ok() && again_b.ok());
    EXPECT_EQ(*again_a, *again_b);
    got->cache.reset();
    EXPECT_EQ(pool->used_pages(), 0);
    EXPECT_EQ(pool->stats().used_slots, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, SessionRoundTrip,
    ::testing::Values(CodecCase{KvType::F16, 0, 4}, CodecCase{KvType::F32, 0, 4},
                      CodecCase{KvType::F16, 1, 16}, CodecCase{KvType::F32, 1, 8},
                      CodecCase{KvType::F16, 2, 4}, CodecCase{KvType::F32, 2, 16},
                      CodecCase{KvType::F16, 3, 4}, CodecCase{KvType::F32, 3, 16},
                      CodecCase{KvType::F16, 3, 2}, CodecCase{KvType::Q8_0, 0, 4},
                      CodecCase{KvType::Q8_0, 1, 16}, CodecCase{KvType::Q8_0, 2, 4},
                      CodecCase{KvType::Q8_0, 3, 2}, CodecCase{KvType::F16, 3, 64},
                      CodecCase{KvType::Q8_0, 3, 96}, CodecCase{KvType::F32, 0, 128},
                      CodecCase{KvType::F16, 2, 32}, CodecCase{KvType::Q8_0, 1, 64}),
    [](const auto& tinfo) {
      return std::string(kv_type_name(tinfo.param.type)) + "_map" +
             std::to_string(tinfo.param.map) + "_P" + std::to_string(tinfo.param.page_tokens);
    });

// The blob holds each head's rows in entry order, not a page's layout: a session saved from
// pages of one run per column (P = 4) or of several 32-slot runs (P = 96) restores into pools
// of either kind.
TEST(SessionCodec, RestoresIntoPoolsOfAnotherPageSize) {
  auto map = contiguous_map(2);
  ThreadPool threads(2);
  for (const int saved_p : {4, 96}) {
    Ragged r = ragged(KvType::F16, map, saved_p, 3);
    const SessionFingerprint fp = fingerprint_of(KvType::F16, *map);
    auto blob = encode_session(*r.cache, r.tokens, fp);
    ASSERT_TRUE(blob.ok());
    for (int page_tokens : {1, 7, 32, 64, 128}) {
      auto pool = make_pool(KvType::F16, page_tokens, 2, 512);
      auto got = decode_session(*blob, fp, *pool, map, kSessionShape, 512);
      ASSERT_TRUE(got.ok()) << got.message();
      EXPECT_TRUE(same_cache(*r.cache, *got->cache)) << "P=" << saved_p << " -> " << page_tokens;
      // Other pages, other summation blocks: equal within rounding.
      EXPECT_TRUE(same_attention(*r.cache, *got->cache, 5, threads, 1e-5f))
          << "P=" << saved_p << " -> " << page_tokens;
    }
  }
}

TEST(SessionCodec, EmptySessionRoundTrips) {
  auto map = contiguous_map(2);
  auto pool = make_pool(KvType::F32, 4, 2, 8);
  auto cache = std::move(PagedKvCache::create(kSessionShape, 64, *pool, map).value());
  const SessionFingerprint fp = fingerprint_of(KvType::F32, *map);
  auto blob = encode_session(*cache, {}, fp);
  ASSERT_TRUE(blob.ok()) << blob.message();
  auto got = decode_session(*blob, fp, *pool, map, kSessionShape, 64);
  ASSERT_TRUE(got.ok()) << got.message();
  EXPECT_TRUE(got->tokens.empty());
  EXPECT_EQ(got->cache->n_positions(), 0);
  EXPECT_EQ(got->cache->pages_held(), 0);
}

TEST(SessionCodec, EncodeRefusesACacheItDoesNotDescribe) {
  auto map = contiguous_map(2);
  Ragged r = ragged(KvType::F16, map, 4, 1);
  const SessionFingerprint fp = fingerprint_of(KvType::F16, *map);
  std::vector<int32_t> short_tokens(r.tokens.begin(), r.tokens.end() - 1);
  EXPECT_FALSE(encode_session(*r.cache, short_tokens, fp).ok());
  SessionFingerprint wrong = fp;
  wrong.kv_type = KvType::F32;
  EXPECT_FALSE(encode_session(*r.cache, r.tokens, wrong).ok());
  wrong = fp;
  wrong.group_map = group_map_fingerprint(*contiguous_map(4));
  EXPECT_FALSE(encode_session(*r.cache, r.tokens, wrong).ok());
  // A step in progress: layer 0 written, layer 1 not yet.
  std::mt19937 rng(4);
  ASSERT_TRUE(r.cache->reserve(r.cache->n_positions() + 1).ok());
  const auto k =
      random_values(static_cast<size_t>(kSessionShape.n_kv_head * kSessionShape.head_dim), rng);
  const auto v =
      random_values(static_cast<size_t>(kSessionShape.n_kv_head * kSessionShape.head_dim_v), rng);
  ASSERT_TRUE(r.cache->write(0, r.cache->n_positions(), k.data(), v.data(), 1).ok());
  auto mid = encode_session(*r.cache, r.tokens, fp);
  ASSERT_FALSE(mid.ok());
  EXPECT_NE(mid.message().find("layer 0"), std::string::npos) << mid.message();
}

TEST(SessionCodec, RefusesEveryKindOfMismatchWithItsReason) {
  auto map = contiguous_map(2);
  Ragged r = ragged(KvType::F16, map, 4, 2);
  const SessionFingerprint fp = fingerprint_of(KvType::F16, *map);
  const std::string blob = encode_session(*r.cache, r.tokens, fp).value();
  auto pool = make_pool(KvType::F16, 4, 4, 256);
  auto refused = [&](const SessionFingerprint& expected, BlockPool& p,
                     std::shared_ptr<const HeadGroupMap> m, const KvShape& shape, int64_t capacity,
                     const std::string& reason) {
    const int64_t free_before = p.free_pages();
    auto got = decode_session(blob, expected, p, std::move(m), shape, capacity);
    ASSERT_FALSE(got.ok()) << reason;
    EXPECT_NE(got.message().find(reason), std::string::npos) << got.message();
    EXPECT_EQ(p.free_pages(), free_before);
  };
  SessionFingerprint other = fp;
  other.model ^= 1;
  refused(other, *pool, map, kSessionShape, 512, "model fingerprint differs");
  other = fp;
  other.profile = 0;
  refused(other, *pool, map, kSessionShape, 512, "profile fingerprint differs");
  // Another element type: the same session read by an F32 engine.
  auto f32_pool = make_pool(KvType::F32, 4, 4, 256);
  other = fp;
  other.kv_type = KvType::F32;
  refused(other, *f32_pool, map, kSessionShape, 512, "KV element type differs");
  // Another head-group map.
  auto unified = contiguous_map(4);
  other = fp;
  other.group_map = group_map_fingerprint(*unified);
  refused(other, *pool, unified, kSessionShape, 512, "head-group map fingerprint differs");
  // Caller errors: the map does not match the expected fingerprint, the pool's type neither.
  refused(fp, *pool, unified, kSessionShape, 512, "head-group map given");
  refused(fp, *f32_pool, map, kSessionShape, 512, "the pool stores");
  // Another shape (same map dimensions): head sizes differ.
  KvShape wide = kSessionShape;
  wide.head_dim_v = 8;
  refused(fp, *pool, map, wide, 512, "shape differs");
  // A capacity below the session's positions.
  refused(fp, *pool, map, kSessionShape, 40, "exceed the capacity");
  // Not a session at all.
  auto junk = decode_session(
      "hello, this is not a session at all, just text of some length......"
      "....................................",
      fp, *pool, map, kSessionShape, 512);
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.message().find("not a Tangram session"), std::string::npos) << junk.message();
}

// A session on Q8_0 pages read by an engine storing F16 (and the reverse) is refused for its
// type, so the turn is recomputed rather than misread; a header naming an unknown type code is
// refused too.
TEST(SessionCodec, ABlobOfAnotherKvTypeIsRefused) {
  auto map = contiguous_map(2);
  Ragged q8 = ragged(KvType::Q8_0, map, 4, 3);
  const std::string q8_blob =
      encode_session(*q8.cache, q8.tokens, fingerprint_of(KvType::Q8_0, *map)).value();
  auto f16_pool = make_pool(KvType::F16, 4, 2, 256);
  auto got = decode_session(q8_blob, fingerprint_of(KvType::F16, *map), *f16_pool, map,
                            testing::session_shape(KvType::Q8_0), 512);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.message().find("KV element type differs (session q8_0, expected f16)"),
            std::string::npos)
      << got.message();
  Ragged f16 = ragged(KvType::F16, map, 4, 3);
  const std::string f16_blob =
      encode_session(*f16.cache, f16.tokens, fingerprint_of(KvType::F16, *map)).value();
  auto q8_pool = make_pool(KvType::Q8_0, 4, 2, 256);
  got = decode_session(f16_blob, fingerprint_of(KvType::Q8_0, *map), *q8_pool, map, kSessionShape,
                       512);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.message().find("KV element type differs"), std::string::npos) << got.message();
  EXPECT_EQ(f16_pool->used_pages(), 0);
  EXPECT_EQ(q8_pool->used_pages(), 0);
}

// The blob format 1 wrote for a per-layer map (one block per (layer, group), heads named by
// their KV head only), written here field by field as that version did.
std::string encode_version_1(const PagedKvCache& c, const std::vector<int32_t>& tokens,
                             const SessionFingerprint& fp) {
  std::string out;
  auto put = [&](const auto& v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  auto put_sum = [&](size_t from) {
    put(static_cast<uint64_t>(XXH3_64bits(out.data() + from, out.size() - from)));
  };
  const KvShape& s = c.shape();
  const HeadGroupMap& map = c.head_groups();
  out += "TGKVSESS";
  put(uint32_t{1});
  put(uint32_t{c.type() == KvType::F32 ? 0u : 1u});
  put(fp.model);
  put(fp.profile);
  put(fp.group_map);
  for (const int32_t d : {s.n_layers, s.n_head, s.n_kv_head, s.head_dim, s.head_dim_v}) put(d);
  put(uint32_t{c.type() == KvType::F32 ? 4u : 2u});
  put(c.n_positions());
  put(int64_t{map.total_groups()});
  put_sum(0);
  const uint64_t header_sum = XXH3_64bits(out.data(), 80);
  const size_t tokens_at = out.size();
  out.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(int32_t));
  put_sum(tokens_at);
  for (int l = 0; l < s.n_layers; ++l)
    for (size_t g = 0; g < map.layer_groups(l).size(); ++g) {
      std::string payload;
      for (const int f : map.members(map.layer_groups(l)[g].flat_group)) {
        const KvHeadView v = c.head_view(l, map.kv_head_of(f));
        const int32_t h = map.kv_head_of(f);
        payload.append(reinterpret_cast<const char*>(&h), 4);
        for (const int64_t x : {v.length, v.n_kept, v.tail_pos0})
          payload.append(reinterpret_cast<const char*>(&x), 8);
        payload.append(reinterpret_cast<const char*>(v.kept_pos),
                       static_cast<size_t>(v.n_kept) * 4);
        std::vector<uint8_t> keys(static_cast<size_t>(v.length) * v.k_row_bytes);
        v.copy_keys(0, v.length, keys.data());
        payload.append(reinterpret_cast<const char*>(keys.data()), keys.size());
        v.for_each_run(0, v.length, [&](int64_t, const uint8_t*, const uint8_t* val, int64_t n) {
          payload.append(reinterpret_cast<const char*>(val),
                         static_cast<size_t>(n) * v.v_row_bytes);
        });
      }
      const size_t block_at = out.size();
      put(int32_t{l});
      put(static_cast<int32_t>(g));
      put(static_cast<uint64_t>(payload.size()));
      out += payload;
      put_sum(block_at);
    }
  const size_t trailer_at = out.size();
  out += "TGKVTAIL";
  put(static_cast<uint64_t>(trailer_at + 32));  // the blob's total size
  put(header_sum);
  put_sum(trailer_at);
  return out;
}

TEST(SessionCodec, ABlobOfThePreviousVersionIsRefused) {
  Ragged r = ragged(KvType::F16, contiguous_map(2), 4, 5);
  const SessionFingerprint fp = fingerprint_of(KvType::F16, *r.map);
  const std::string old = encode_version_1(*r.cache, r.tokens, fp);
  // Well formed as version 1: its size is the trailer's, and it differs from this version's blob
  // in the version field and the group blocks only.
  uint64_t total = 0;
  std::memcpy(&total, old.data() + old.size() - 24, sizeof(total));
  ASSERT_EQ(total, old.size());
  const std::string now = encode_session(*r.cache, r.tokens, fp).value();
  ASSERT_NE(old.size(), now.size());
  auto pool = make_pool(KvType::F16, 4, 2, 256);
  auto got = decode_session(old, fp, *pool, r.map, kSessionShape, 512);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.message().find("session format version 1 (this build reads 2"), std::string::npos)
      << got.message();
  EXPECT_NE(got.message().find("recomputed"), std::string::npos) << got.message();
  EXPECT_EQ(pool->used_pages(), 0);
  // Nor is it listed with a history to restore.
  EXPECT_FALSE(inspect_session(old).ok());
  EXPECT_FALSE(session_summary_bytes(std::string_view(old).substr(0, kSessionHeaderBytes)).ok());
  EXPECT_TRUE(decode_session(now, fp, *pool, r.map, kSessionShape, 512).ok());
}

// A small session: every byte can be tried.
Ragged small_session(KvType type) { return ragged(type, contiguous_map(2), 4, 6, 9, 3); }

TEST(SessionCodec, EveryTruncationIsRefusedAndNamesTheByte) {
  Ragged r = small_session(KvType::F16);
  const SessionFingerprint fp = fingerprint_of(KvType::F16, *r.map);
  const std::string blob = encode_session(*r.cache, r.tokens, fp).value();
  auto pool = make_pool(KvType::F16, 4, 2, 64);
  for (size_t n = 0; n < blob.size(); ++n) {
    auto got =
        decode_session(std::string_view(blob).substr(0, n), fp, *pool, r.map, kSessionShape, 512);
    ASSERT_FALSE(got.ok()) << "prefix of " << n << " bytes accepted";
    EXPECT_NE(got.message().find(fmt::format("truncated at byte {}", n)), std::string::npos)
        << n << ": " << got.message();
    ASSERT_EQ(pool->used_pages(), 0);
  }
  // Bytes appended after the trailer are refused too.
  EXPECT_FALSE(decode_session(blob + "x", fp, *pool, r.map, kSessionShape, 512).ok());
  EXPECT_TRUE(decode_session(blob, fp, *pool, r.map, kSessionShape, 512).ok());
}

TEST(SessionCodec, EveryByteFlipIsRefused) {
  for (KvType type : {KvType::F16, KvType::F32, KvType::Q8_0}) {
    Ragged r = small_session(type);
    const SessionFingerprint fp = fingerprint_of(type, *r.map);
    const std::string blob = encode_session(*r.cache, r.tokens, fp).value();
    auto pool = make_pool(type, 4, 2, 64);
    std::mt19937 rng(8);
    // Every byte with one bit flipped, then a few hundred random multi-bit flips.
    std::vector<std::pair<size_t, uint8_t>> flips;
    for (size_t i = 0; i < blob.size(); ++i)
      flips.emplace_back(i, static_cast<uint8_t>(1u << (i % 8)));
    for (int i = 0; i < 400; ++i)
      flips.emplace_back(rng() % blob.size(), static_cast<uint8_t>(1 + rng() % 255));
    for (const auto& [at, mask] : flips) {
      std::string bad = blob;
      bad[at] = static_cast<char>(static_cast<uint8_t>(bad[at]) ^ mask);
      auto got = decode_session(bad, fp, *pool, r.map, testing::session_shape(type), 512);
      // There is no padding: every byte is covered by a checksum, so nothing may pass.
      ASSERT_FALSE(got.ok()) << "flip of byte " << at << " by " << int{mask} << " accepted";
      ASSERT_EQ(pool->used_pages(), 0);
    }
  }
}

TEST(SessionCodec, ChecksumErrorsNameTheBlock) {
  Ragged r = ragged(KvType::F32, contiguous_map(2), 4, 1);
  const SessionFingerprint fp = fingerprint_of(KvType::F32, *r.map);
  const std::string blob = encode_session(*r.cache, r.tokens, fp).value();
  auto pool = make_pool(KvType::F32, 4, 2, 256);
  // The last row of the last group (flat group 3) sits just before its checksum and the trailer.
  std::string bad = blob;
  bad[bad.size() - 32 - 8 - 1] ^= 0x40;
  auto got = decode_session(bad, fp, *pool, r.map, kSessionShape, 512);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.message().find("checksum of group 3 fails"), std::string::npos) << got.message();
  bad = blob;
  bad[20] ^= 1;  // the model fingerprint, inside the header
  got = decode_session(bad, fp, *pool, r.map, kSessionShape, 512);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.message().find("checksum of the header fails"), std::string::npos) << got.message();
  bad = blob;
  bad[88 + 2] ^= 1;  // the first token
  got = decode_session(bad, fp, *pool, r.map, kSessionShape, 512);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.message().find("checksum of the token history fails"), std::string::npos)
      << got.message();
}

TEST(SessionCodec, APoolTooSmallIsRefusedAndLeftUnchanged) {
  Ragged r = ragged(KvType::F16, contiguous_map(2), 4, 2);
  const SessionFingerprint fp = fingerprint_of(KvType::F16, *r.map);
  const std::string blob = encode_session(*r.cache, r.tokens, fp).value();
  const int64_t needed = testing::pages_for_entries(*r.cache);
  auto probe = make_pool(KvType::F16, 4, 2, 512);
  const int64_t exact =
      decode_session(blob, fp, *probe, r.map, kSessionShape, 512).value().cache->pages_held();
  EXPECT_EQ(exact, needed);
  // A pool one page short, partly used by another sequence.
  auto pool = make_pool(KvType::F16, 4, 2, exact + 3);
  std::vector<PageId> other;
  ASSERT_TRUE(pool->allocate(4, other).ok());
  auto got = decode_session(blob, fp, *pool, r.map, kSessionShape, 512);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.message().find(fmt::format("needs {} pages", exact)), std::string::npos)
      << got.message();
  EXPECT_EQ(pool->used_pages(), 4);
  EXPECT_EQ(pool->stats().used_slots, 0);
  EXPECT_TRUE(pool->check_consistency().ok());
  ASSERT_TRUE(pool->release(other).ok());
  EXPECT_TRUE(decode_session(blob, fp, *pool, r.map, kSessionShape, 512).ok());
}

TEST(SessionCodec, InspectReadsHeaderAndTokensOnly) {
  Ragged r = ragged(KvType::F16, clustered_map(), 4, 3);
  const SessionFingerprint fp = fingerprint_of(KvType::F16, *r.map);
  std::string blob = encode_session(*r.cache, r.tokens, fp).value();
  auto s = inspect_session(blob);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->tokens, r.tokens);
  EXPECT_EQ(s->fingerprint.model, fp.model);
  EXPECT_EQ(s->fingerprint.group_map, fp.group_map);
  EXPECT_EQ(s->fingerprint.kv_type, KvType::F16);
  EXPECT_EQ(s->shape.head_dim_v, kSessionShape.head_dim_v);
  EXPECT_EQ(s->n_groups, r.map->total_groups());
  // The header alone says how much of the blob inspect needs: that prefix is enough.
  auto need = session_summary_bytes(std::string_view(blob).substr(0, kSessionHeaderBytes));
  ASSERT_TRUE(need.ok()) << need.message();
  EXPECT_EQ(*need, kSessionHeaderBytes + 4 * r.tokens.size() + 8);
  auto from_prefix = inspect_session(std::string_view(blob).substr(0, *need));
  ASSERT_TRUE(from_prefix.ok()) << from_prefix.message();
  EXPECT_EQ(from_prefix->tokens, r.tokens);
  EXPECT_FALSE(inspect_session(std::string_view(blob).substr(0, *need - 1)).ok());
  EXPECT_FALSE(
      session_summary_bytes(std::string_view(blob).substr(0, kSessionHeaderBytes - 1)).ok());
  blob[90] ^= 1;
  EXPECT_FALSE(inspect_session(blob).ok());
  blob[90] ^= 1;
  blob[20] ^= 1;  // header checksum
  EXPECT_FALSE(session_summary_bytes(blob).ok());
}

}  // namespace
}  // namespace tangram
