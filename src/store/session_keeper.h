// The sessions a scheduler keeps between turns, and where their KV goes when it leaves the pool.
//
// SessionKeeper owns the session store (which conversation's KV is resident, see
// session_store.h) and the tiers below the pool (host memory, disk, Redis; see session_tiers.h).
// The scheduler asks it for a request's session (claim: restored from a tier when it was moved
// down), hands the KV back when the request finishes (give_back: kept resident and written
// through to disk and Redis), and asks it for pages under memory pressure (evict_one: the least
// recently used idle session moves down a tier, or is dropped without tiers).
//
// Threading: driven by the scheduler's thread, except wait_written() (any thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "kv/block_pool.h"
#include "kv/head_group_map.h"
#include "kv/paged_kv_cache.h"
#include "store/session_fingerprint.h"
#include "store/session_store.h"
#include "store/session_tiers.h"

namespace tangram {

struct SessionKeeperOptions {
  size_t max_sessions = 1024;  // session entries remembered
  // Tiers below the resident pool for idle sessions' KV (see session_tiers.h): a host-memory
  // spill area (0: none) and a disk directory ("" = none), written through after every turn so
  // a crash loses at most the turn in flight, and read back at start-up.
  size_t kv_host_memory = 0;
  std::string kv_disk_dir;
  uint64_t kv_disk_bytes = uint64_t{8} << 30;
  // The shared tier: a Redis address ("" = none; see session_redis_store.h), its key prefix
  // ("" = "tangram:<fingerprint of model, KV type and policy>:", so deployments of different
  // models never meet) and the expiry of a stored session (0: none).
  std::string kv_redis;
  std::string kv_redis_prefix;
  int64_t kv_redis_ttl_seconds = 0;
  // Idle sessions move down a tier after this long without a turn (0: only under memory
  // pressure). Needs a tier.
  double kv_idle_offload_seconds = 0;
  // Where tier warnings go (Redis lost or back); default: a logfmt line on stderr.
  std::function<void(const std::string&)> warn;

  bool tiered() const { return kv_host_memory > 0 || !kv_disk_dir.empty() || !kv_redis.empty(); }
  // Errors: a negative idle time, or idle offload without a tier to move sessions to.
  Status validate() const;
};

// The pool a restored session's KV is decoded into, and the shape it must have.
struct SessionPool {
  BlockPool& pool;
  std::shared_ptr<const HeadGroupMap> map;
  KvShape shape;
  int64_t context = 0;  // positions per sequence
};

class SessionKeeper {
 public:
  using Clock = std::chrono::steady_clock;
  // `fingerprint` is what a tier's blob must match to be restored (unused without tiers).
  // Errors: invalid options, an unparsable Redis address, a disk directory that cannot be used.
  static Result<std::unique_ptr<SessionKeeper>> create(SessionKeeperOptions options,
                                                       SessionPool pool,
                                                       const SessionFingerprint& fingerprint);
  ~SessionKeeper();
  SessionKeeper(const SessionKeeper&) = delete;
  SessionKeeper& operator=(const SessionKeeper&) = delete;

  Session* find(const std::string& id) { return store_.find(id); }
  const Session* find(const std::string& id) const { return store_.find(id); }
  // The session named by a caller (created when new).
  Session& named(const std::string& id) { return store_.get_or_create(id, /*anonymous=*/false); }
  // The idle resident session a prompt without an id continues (SessionStore::match_prefix).
  Session* continuation(const std::vector<int32_t>& prompt, int64_t min_prefix) {
    return store_.match_prefix(prompt, min_prefix);
  }
  // Lends a session to a request: busy until give_back() or unclaim(); its KV is brought back
  // from a tier when it was moved down (if it fits; otherwise it is recomputed).
  void claim(Session& session);
  // Undoes claim() for a request that was not admitted: the cache it was given (covering
  // tokens[0, n_positions)) returns to the session unless the session already holds one.
  void unclaim(Session& session, std::span<const int32_t> tokens,
               std::unique_ptr<PagedKvCache> cache);
  // Ends a request's use of session `id` ("" = none): a cache (covering tokens[0, n_positions))
  // stays resident under the session, an anonymous one made for it when id is "", and is written
  // through to disk and Redis; without a cache the session's tokens are forgotten (recomputed
  // next turn). Returns the session's id ("" when there is none).
  std::string give_back(const std::string& id, std::span<const int32_t> tokens,
                        std::unique_ptr<PagedKvCache> cache, Clock::time_point now);
  // Reads a session's KV from disk or Redis in the background while its request waits (no-op
  // when it is resident, lent, or there are no tiers).
  void prefetch(const std::string& id);
  // Forgets a session everywhere (its entry unless lent, its copies in every tier). True when
  // its entry was known.
  bool forget(const std::string& id);

  // Frees the least recently used idle session's cache, moving it down a tier first when there
  // are tiers; returns the pages freed, or -1 when no idle session holds a cache.
  int64_t evict_one();
  // Frees the caches of all idle sessions (moved down a tier when there are tiers); returns the
  // pages freed.
  int64_t evict_idle();
  // Moves the caches of sessions idle for at least kv_idle_offload_seconds down a tier; returns
  // how many moved. Cheap when there is nothing to do.
  int64_t offload_idle(Clock::time_point now = Clock::now());
  // How often the driving thread should wake up while idle, for offload_idle() and so that
  // stats catch up with the tiers' background I/O (nullopt: never needed).
  std::optional<Clock::duration> housekeeping_period() const;

  // Where an idle session's KV is: "resident" (with the pages' bytes), a tier, or "none".
  SessionTiers::Location where(const std::string& id);
  // Every session named by its caller (not made up for an anonymous request), with the tokens its
  // KV holds or held: after a restart with a disk tier, the sessions found on disk.
  std::vector<std::pair<std::string, std::vector<int32_t>>> named_sessions() const;
  // Waits until every session written through after its turn is on disk and in Redis.
  void flush_writes();
  // Waits (bounded) until the session's state after its last turn is on disk and in Redis; true
  // when it is or there is nothing to write. Thread-safe.
  bool wait_written(const std::string& id, std::chrono::milliseconds timeout) const;

  size_t size() const { return store_.size(); }
  size_t resident() const { return store_.resident(); }
  int64_t evictions() const { return store_.evictions(); }
  SessionTierStats tier_stats() const;
  const SessionKeeperOptions& options() const { return options_; }

 private:
  SessionKeeper(SessionKeeperOptions options, SessionPool pool,
                const SessionFingerprint& fingerprint);
  // Moves an idle resident session's cache down a tier (encoded first) and frees its pages;
  // returns the pages freed.
  int64_t offload(Session& victim);
  // Brings a moved-down session's KV back into the pool; false (recompute) if it is in no tier,
  // does not decode (counted), or does not fit.
  bool restore(Session& session);
  // Queues a session at rest to be written through to disk and Redis (after a turn).
  void persist(const Session& session);

  SessionKeeperOptions options_;
  SessionPool pool_;
  SessionFingerprint fingerprint_;
  SessionStore store_;
  std::unique_ptr<SessionTiers> tiers_;  // null: evicted sessions are recomputed
  std::string spill_buffer_;             // reused encoding buffer (saves page faults)
  uint64_t tick_ = 0;                    // orders returns, for least-recently-used eviction
};

}  // namespace tangram
