// The Redis session store against a real redis-server on loopback: binary blobs round-trip,
// misses are nullopt, prefixes keep deployments apart, expiry is set, and a Redis that goes away
// is an error value with one warning (not a hang), after which the store reconnects by itself.
// Also the address parser.
#include "store/session_redis_store.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "support/redis_server.h"
#include "support/test_support.h"

namespace tangram {
namespace {

using std::chrono::milliseconds;

RedisStoreOptions options_for(const testing::RedisServer& redis,
                              std::vector<std::string>* warnings) {
  RedisStoreOptions o;
  o.endpoint = parse_redis_url(redis.address()).value();
  o.key_prefix = "test:";
  o.timeout = milliseconds(500);
  o.retry_after = milliseconds(0);
  o.warn = [warnings](const std::string& m) { warnings->push_back(m); };
  return o;
}

std::string random_blob(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string b(n, '\0');
  for (char& c : b) c = static_cast<char>(rng());
  return b;
}

TEST(RedisUrl, ParsesEveryForm) {
  auto a = parse_redis_url("localhost");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "localhost");
  EXPECT_EQ(a->port, 6379);
  auto b = parse_redis_url("redis://:s3cret@10.0.0.2:7000/3");
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ(b->host, "10.0.0.2");
  EXPECT_EQ(b->port, 7000);
  EXPECT_EQ(b->password, "s3cret");
  EXPECT_EQ(b->db, 3);
  EXPECT_EQ(b->describe().find("s3cret"), std::string::npos);  // never logged
  for (const char* bad : {"", "redis://", "host:0", "host:65536", "host:x", "host:1/db", ":6379"}) {
    auto r = parse_redis_url(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
}

TEST(SessionRedisStore, BinaryBlobsRoundTripAndMissesAreEmpty) {
  testing::RedisServer redis(testing::temp_dir());
  ASSERT_TRUE(redis.start());
  std::vector<std::string> warnings;
  auto store = SessionRedisStore::open(options_for(redis, &warnings));
  ASSERT_TRUE(store.ok()) << store.message();
  SessionRedisStore& s = **store;

  const std::string big = random_blob(5 << 20, 1);  // NULs and every byte value, 5 MiB
  const std::string id = std::string("k0/conv\0x/../y", 14);
  ASSERT_TRUE(s.put(id, big).ok());
  auto got = s.get(id);
  ASSERT_TRUE(got.ok()) << got.message();
  ASSERT_TRUE(got->has_value());
  EXPECT_TRUE(**got == big);
  EXPECT_TRUE(s.contains(id).value());

  auto miss = s.get("nobody");
  ASSERT_TRUE(miss.ok());
  EXPECT_FALSE(miss->has_value());
  EXPECT_FALSE(s.contains("nobody").value());

  ASSERT_TRUE(s.put(id, "v2").ok());  // last write wins
  EXPECT_EQ(**s.get(id), "v2");
  EXPECT_TRUE(s.erase(id).value());
  EXPECT_FALSE(s.erase(id).value());
  EXPECT_FALSE(s.get(id)->has_value());

  EXPECT_EQ(s.stats().puts, 2);
  EXPECT_EQ(s.stats().bytes_put, static_cast<int64_t>(big.size() + 2));
  EXPECT_EQ(s.stats().hits, 2);
  EXPECT_EQ(s.stats().gets, 4);
  EXPECT_EQ(s.stats().errors, 0);
  EXPECT_TRUE(warnings.empty());
}

TEST(SessionRedisStore, PrefixesSeparateDeploymentsAndExpirySet) {
  testing::RedisServer redis(testing::temp_dir());
  ASSERT_TRUE(redis.start());
  std::vector<std::string> warnings;
  RedisStoreOptions a = options_for(redis, &warnings);
  RedisStoreOptions b = a;
  b.key_prefix = "other:";
  b.ttl_seconds = 2;
  auto sa = SessionRedisStore::open(a);
  auto sb = SessionRedisStore::open(b);
  ASSERT_TRUE(sa.ok() && sb.ok());
  ASSERT_TRUE((*sa)->put("s", "from a").ok());
  EXPECT_FALSE((*sb)->get("s")->has_value());
  ASSERT_TRUE((*sb)->put("s", "from b").ok());
  EXPECT_EQ(**(*sa)->get("s"), "from a");
  EXPECT_EQ(**(*sb)->get("s"), "from b");
  // b's copy expires; a's (no expiry) stays.
  std::this_thread::sleep_for(milliseconds(3000));
  EXPECT_FALSE((*sb)->get("s")->has_value());
  EXPECT_EQ(**(*sa)->get("s"), "from a");
}

TEST(SessionRedisStore, LostRedisIsAnErrorValueWithOneWarningThenReconnects) {
  testing::RedisServer redis(testing::temp_dir());
  ASSERT_TRUE(redis.start());
  std::vector<std::string> warnings;
  auto store = SessionRedisStore::open(options_for(redis, &warnings));
  ASSERT_TRUE(store.ok());
  SessionRedisStore& s = **store;
  ASSERT_TRUE(s.put("a", "1").ok());
  EXPECT_TRUE(s.stats().connected);

  redis.stop();
  EXPECT_FALSE(s.put("a", "2").ok());
  EXPECT_FALSE(s.get("a").ok());
  EXPECT_FALSE(s.contains("a").ok());
  EXPECT_FALSE(s.erase("a").ok());
  EXPECT_FALSE(s.stats().connected);
  EXPECT_EQ(s.stats().errors, 4);
  ASSERT_EQ(warnings.size(), 1u) << "one warning per outage";
  EXPECT_NE(warnings[0].find("local tiers"), std::string::npos) << warnings[0];

  ASSERT_TRUE(redis.start());  // same port, empty (no persistence)
  ASSERT_TRUE(s.put("a", "3").ok());
  EXPECT_EQ(**s.get("a"), "3");
  EXPECT_TRUE(s.stats().connected);
  EXPECT_EQ(s.stats().connects, 2);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[1].find("back"), std::string::npos) << warnings[1];
}

TEST(SessionRedisStore, UnreachableAtStartIsNotFatalAndRetriesAreSpaced) {
  std::vector<std::string> warnings;
  RedisStoreOptions o;
  o.endpoint =
      parse_redis_url("127.0.0.1:" + std::to_string(testing::free_loopback_port())).value();
  o.retry_after = milliseconds(60000);
  o.warn = [&](const std::string& m) { warnings.push_back(m); };
  auto store = SessionRedisStore::open(o);
  ASSERT_TRUE(store.ok()) << store.message();
  EXPECT_EQ(warnings.size(), 1u);
  // Within the retry interval every call fails at once, without another connection attempt.
  for (int i = 0; i < 100; ++i) EXPECT_FALSE((*store)->put("x", "y").ok());
  EXPECT_EQ((*store)->stats().attempts, 1);
  EXPECT_EQ((*store)->stats().connects, 0);
  EXPECT_EQ((*store)->stats().errors, 101);
  EXPECT_EQ(warnings.size(), 1u);
}

}  // namespace
}  // namespace tangram
