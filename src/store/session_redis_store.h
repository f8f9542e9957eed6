// The shared session tier: serialised sessions in a Redis server that every replica of a
// deployment reads and writes, so a conversation's next turn can be served by any of them.
//
// One Redis string per session under "<prefix><id>" holding session_codec's blob as given (its
// checksums and fingerprints are what guard a restore; the store only moves bytes). Writes are
// plain SETs (optionally with an expiry): the last turn written wins. Memory is bounded on the
// Redis side (maxmemory with an LRU policy; scripts/cluster.sh sets one).
//
// Redis being away is never an error for the caller's request: every call returns an error
// value, the first failure after a success logs one warning, and the store retries the
// connection at most every `retry_after` (a call before then fails at once, so a dead Redis costs
// the serving path nothing). Each command is bounded by `timeout`. One store is used by one
// thread at a time (the scheduler's); it takes no locks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

struct redisContext;

namespace tangram {

struct RedisEndpoint {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string password;          // AUTH when non-empty
  int db = 0;                    // SELECT when non-zero
  std::string describe() const;  // "host:port/db", never the password
};

// "redis://[:password@]host[:port][/db]" or "host[:port]". Errors name what is wrong.
Result<RedisEndpoint> parse_redis_url(std::string_view url);

struct RedisStoreOptions {
  RedisEndpoint endpoint;
  std::string key_prefix = "tangram:session:";
  std::chrono::milliseconds timeout{1000};      // connect and per-command limit
  std::chrono::milliseconds retry_after{2000};  // least time between connection attempts
  int64_t ttl_seconds = 0;                      // expiry of a stored session; 0: none
  // Where warnings go (connection lost, restored); default: one line on stderr.
  std::function<void(const std::string&)> warn;
};

struct RedisStoreStats {
  bool connected = false;
  int64_t puts = 0;
  int64_t bytes_put = 0;
  int64_t gets = 0;  // lookups answered (hit or miss)
  int64_t hits = 0;
  int64_t errors = 0;    // calls that failed: no connection, a timeout, an error reply
  int64_t attempts = 0;  // connection attempts
  int64_t connects = 0;  // successful connections (the first and every reconnection)
};

class SessionRedisStore {
 public:
  // Never fails on connectivity (the first connection is tried here and retried later); errors
  // only for invalid options.
  static Result<std::unique_ptr<SessionRedisStore>> open(RedisStoreOptions options);
  ~SessionRedisStore();
  SessionRedisStore(const SessionRedisStore&) = delete;
  SessionRedisStore& operator=(const SessionRedisStore&) = delete;

  Status put(std::string_view id, std::string_view blob);
  // The blob stored for id; nullopt when there is none.
  Result<std::optional<std::string>> get(std::string_view id);
  Result<bool> contains(std::string_view id);
  // Bytes stored for id (0: none).
  Result<int64_t> size_of(std::string_view id);
  // Deletes a session; false if there was none.
  Result<bool> erase(std::string_view id);

  const RedisStoreStats& stats() const { return stats_; }
  const RedisStoreOptions& options() const { return options_; }

 private:
  explicit SessionRedisStore(RedisStoreOptions options);
  // A usable connection, connecting when none is open and the retry interval has passed.
  Status connection();
  // Drops the connection after a failure (warning once), so the next call reconnects later.
  Error fail(const std::string& what);
  std::string key(std::string_view id) const;

  RedisStoreOptions options_;
  redisContext* ctx_ = nullptr;
  std::chrono::steady_clock::time_point next_attempt_{};
  bool warned_ = false;  // a warning for the current outage was given
  RedisStoreStats stats_;
};

}  // namespace tangram
