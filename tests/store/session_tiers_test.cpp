// SessionTiers on its own: the write-behind queue, and a cache whose head groups span layers
// through every tier (the tiers under a scheduler are tested in
// tests/scheduler/tiered_scheduler_test.cpp).
#include <gtest/gtest.h>

#include <string>

#include "store/session_codec.h"
#include "store/session_disk_store.h"
#include "store/session_test_util.h"
#include "store/session_tiers.h"
#include "support/redis_server.h"
#include "support/test_support.h"

namespace tangram::testing {
namespace {

// Write-behind: persist() returns at once and the writer thread stores the blob; the newest
// state always wins, an erase is final even against a queued or running write, and destruction
// writes whatever is still queued.
TEST(SessionTierQueue, WriteBehindKeepsTheNewestStateAndErasesForGood) {
  const auto dir = temp_dir() / "kv";
  {
    SessionTierOptions o;
    o.disk_dir = dir;
    auto tiers = SessionTiers::create(o);
    ASSERT_TRUE(tiers.ok()) << tiers.message();
    SessionTiers& t = **tiers;
    for (int i = 0; i <= 50; ++i) {
      t.persist("a", std::string(4096, 'a') + std::to_string(i));
      t.persist("b", std::string(4096, 'b') + std::to_string(i));
      auto a = t.fetch("a");  // queued or written: either way the newest
      ASSERT_TRUE(a.has_value());
      EXPECT_EQ(a->blob, std::string(4096, 'a') + std::to_string(i));
    }
    t.erase("b");
    t.flush();
    EXPECT_EQ(t.where("b").tier, "none");
    EXPECT_EQ(t.where("a").tier, "disk");
    EXPECT_EQ(t.where("a").bytes,
              static_cast<int64_t>(12 + 1 + 4096 + 2));  // frame + blob "aaa...50"
    t.persist("c", "last words");                        // still queued when the tiers go
  }
  auto disk = SessionDiskStore::open(dir, 1 << 20);
  ASSERT_TRUE(disk.ok()) << disk.message();
  EXPECT_EQ((*disk)->get("a").value(), std::string(4096, 'a') + "50");
  EXPECT_FALSE((*disk)->contains("b"));
  EXPECT_EQ((*disk)->get("c").value(), "last words");
}

// A ragged cache grouped across layers, encoded, stored in each tier (host, disk read back by a
// new instance, Redis read back by another instance) and decoded: bit-exact entries and attention.
TEST(SessionTiers, EveryTierRoundTripsACrossLayerCacheBitExact) {
  auto map = cross_layer_map();
  ASSERT_FALSE(map->per_layer());
  ThreadPool threads(2);
  for (const KvType type : {KvType::F16, KvType::F32, KvType::Q8_0}) {
    SCOPED_TRACE(kv_type_name(type));
    Ragged r = ragged(type, map, 4, 3);
    const SessionFingerprint fp = fingerprint_of(type, *map);
    const std::string blob = encode_session(*r.cache, r.tokens, fp).value();
    auto restored = [&](const std::optional<SessionTiers::Fetched>& got, const char* tier) {
      ASSERT_TRUE(got.has_value()) << tier;
      EXPECT_STREQ(got->tier, tier);
      EXPECT_EQ(got->blob, blob) << tier;
      auto pool = make_pool(type, 4, 3, 256);
      auto s = decode_session(got->blob, fp, *pool, map, session_shape(type), 512);
      ASSERT_TRUE(s.ok()) << tier << ": " << s.message();
      EXPECT_EQ(s->tokens, r.tokens);
      EXPECT_TRUE(same_cache(*r.cache, *s->cache)) << tier;
      EXPECT_TRUE(same_attention(*r.cache, *s->cache, 21, threads)) << tier;
    };
    {
      SessionTierOptions o;
      o.host_bytes = 16 << 20;
      auto tiers = SessionTiers::create(o);
      ASSERT_TRUE(tiers.ok()) << tiers.message();
      (*tiers)->offload("s", blob);
      restored((*tiers)->fetch("s"), "host");
    }
    const auto dir = temp_dir() / (std::string("cross-") + std::string(kv_type_name(type)));
    {
      SessionTierOptions o;
      o.disk_dir = dir;
      auto writer = SessionTiers::create(o);
      ASSERT_TRUE(writer.ok()) << writer.message();
      (*writer)->persist("s", blob);
      (*writer)->flush();
    }
    {
      SessionTierOptions o;
      o.disk_dir = dir;
      auto reader = SessionTiers::create(o);  // as after a restart
      ASSERT_TRUE(reader.ok()) << reader.message();
      restored((*reader)->fetch("s"), "disk");
    }
    RedisServer redis(temp_dir());
    ASSERT_TRUE(redis.start());
    RedisStoreOptions ro;
    ro.endpoint = parse_redis_url(redis.address()).value();
    ro.key_prefix = "cross:";
    SessionTierOptions o;
    o.redis = ro;
    {
      auto replica_a = SessionTiers::create(o);
      ASSERT_TRUE(replica_a.ok()) << replica_a.message();
      (*replica_a)->persist("s", blob);
      (*replica_a)->flush();
    }
    auto replica_b = SessionTiers::create(o);
    ASSERT_TRUE(replica_b.ok()) << replica_b.message();
    restored((*replica_b)->fetch("s"), "redis");
  }
}

}  // namespace
}  // namespace tangram::testing
