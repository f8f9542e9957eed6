// Where idle sessions' KV goes when the resident pool needs their pages: a host-memory spill
// area (bounded, least recently used first out), optionally a local disk directory (bounded,
// crash-safe), and optionally a Redis server shared by every replica of a deployment. A session
// moved down is restored on its next turn by decoding its blob into the pool, instead of being
// recomputed from its tokens.
//
// Blobs are session_codec's serialised form (checksummed, fingerprinted): a blob that no longer
// decodes (another model, a corrupt file) is dropped and the turn is recomputed.
//
// Lookups go host, then disk, then Redis. After every turn the session is written through to
// disk and Redis (persist), so a crash, or the death of the whole replica, loses at most the
// turn in flight (and a turn that finished within the few milliseconds its write takes).
//
// Write-behind: persist() only queues the blob; a writer thread does the disk write (fsync) and
// the Redis SET, so the engine thread never waits on them. A queued blob is the session's
// newest state: fetch() and where() see it, a newer persist() replaces it, erase() cancels it,
// and destruction writes whatever is still queued. Disk and Redis calls of both threads are
// serialised; stats() reads snapshots and never waits on I/O.
//
// Read-ahead: prefetch() asks the same thread to read a session from disk or Redis while its
// request waits in the queue, so that the restore at admission only decodes (no I/O on the
// engine thread). Reads go before writes. A prefetched blob is dropped when the session is
// written, offloaded or erased meanwhile (it would be stale). A local copy may be older than
// Redis's when another replica served later turns: that is safe (a restored cache is only used for
// the prefix its tokens share with the new prompt), just less reuse.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "common/result.h"
#include "store/session_disk_store.h"
#include "store/session_redis_store.h"

namespace tangram {

struct SessionTierOptions {
  size_t host_bytes = 0;           // the spill area's cap (0: none)
  std::filesystem::path disk_dir;  // empty: no disk tier
  uint64_t disk_bytes = uint64_t{8} << 30;
  std::optional<RedisStoreOptions> redis;  // none: no shared tier
};

struct SessionTierStats {
  int64_t host_sessions = 0;
  int64_t host_bytes = 0;
  int64_t disk_sessions = 0;
  int64_t disk_bytes = 0;
  int64_t offloads = 0;       // blobs put into a tier
  int64_t demotions = 0;      // host -> disk moves
  int64_t dropped = 0;        // blobs that fit no local tier (recomputed unless Redis has them)
  int64_t restores = 0;       // blobs decoded back into the pool
  int64_t restores_host = 0;  // ... of which from each tier
  int64_t restores_disk = 0;
  int64_t restores_redis = 0;
  int64_t restore_failures = 0;  // blobs refused on restore (fingerprint, corruption): recomputed
  int64_t recomputes = 0;        // evicted sessions whose next turn found them in no tier
  double offload_seconds = 0;    // encoding and storing
  double restore_seconds = 0;    // fetching and decoding
  int64_t prefetches = 0;        // sessions read ahead while their request waited
  int64_t prefetch_hits = 0;     // restores served from a read-ahead (no I/O at admission)
  double write_seconds = 0;  // the writer thread's disk and Redis writes (off the engine thread)
  int64_t write_errors = 0;  // write-throughs that failed (disk full, Redis down)
  bool redis_enabled = false;
  RedisStoreStats redis;
};

class SessionTiers {
 public:
  static Result<std::unique_ptr<SessionTiers>> create(SessionTierOptions options);
  SessionTiers() = default;
  ~SessionTiers();
  SessionTiers(const SessionTiers&) = delete;
  SessionTiers& operator=(const SessionTiers&) = delete;

  // Stores a session's blob: in host memory when it fits (demoting least recently used blobs to
  // disk, or dropping them without a disk tier), else on disk, else nowhere (counted). With Redis,
  // a session whose last write-through did not reach it is published there too.
  void offload(const std::string& id, std::string blob);
  // Queues the blob to be written through to disk and Redis (after a turn, so a crash loses at
  // most the turn in flight). No-op without either.
  void persist(const std::string& id, std::string blob);
  // Waits until every queued write is done (tests, benchmarks, shutdown).
  void flush();
  // Waits (at most `timeout`) until the session's newest state is written; true when it is (or
  // nothing was queued). Thread-safe: the server calls it before it answers a turn, so that a
  // turn whose answer the client has seen is on disk and in Redis.
  bool wait_written(const std::string& id, std::chrono::milliseconds timeout);
  // Reads the session from disk or Redis in the background (no-op if it is in host memory, or
  // there is neither tier).
  void prefetch(const std::string& id);
  struct Fetched {
    std::string blob;
    const char* tier = "";  // "host", "disk" or "redis"
  };
  // Takes a session's blob out of the host tier, or reads it from disk or Redis (which keep
  // their copies). Nullopt when no tier has it (or Redis is unreachable).
  std::optional<Fetched> fetch(const std::string& id);
  struct Location {
    std::string tier = "none";  // "host", "disk", "redis" or "none"
    int64_t bytes = 0;          // the serialised session's size there
  };
  // Where a session is (asks Redis when the local tiers lack it).
  Location where(const std::string& id);
  void erase(const std::string& id);
  bool has_disk() const { return disk_ != nullptr; }
  bool has_redis() const { return redis_ != nullptr; }
  bool writes_through() const { return disk_ != nullptr || redis_ != nullptr; }
  // The sessions on disk (found at start-up, for example), most recently used first, with their
  // token histories (read from each file's header and token block only; empty when unreadable:
  // such a file is refused at its restore).
  std::vector<std::pair<std::string, std::vector<int32_t>>> disk_sessions();

  SessionTierStats stats() const;
  SessionTierStats& counters() { return counters_; }

 private:
  void io_loop();
  // Drops a read-ahead of id (stale after a write, offload or erase). Caller holds mu_.
  void forget_prefetch(const std::string& id);
  // Waits while the I/O thread is writing or reading `id` (so what follows sees its result).
  void wait_unless_writing(std::unique_lock<std::mutex>& lock, const std::string& id);
  // Refreshes the disk and Redis figures stats() reports. Caller holds io_mu_.
  void snapshot_io_stats();

  size_t host_cap_ = 0;
  size_t host_used_ = 0;
  std::list<std::string> host_lru_;  // front = least recently used
  std::map<std::string, std::pair<std::string, std::list<std::string>::iterator>> host_;
  std::unique_ptr<SessionDiskStore> disk_;
  std::unique_ptr<SessionRedisStore> redis_;
  SessionTierStats counters_;  // engine-thread counters

  // Write-behind queue (guarded by mu_).
  mutable std::mutex mu_;
  std::condition_variable wake_, done_;
  std::map<std::string, std::string> pending_;  // id -> newest blob not yet written
  std::string writing_;                         // id being written now ("" = none)
  std::deque<std::string> to_read_;             // prefetch requests, in order
  std::map<std::string, Fetched> prefetched_;   // read ahead, not yet taken
  std::set<std::string> absent_;                // read ahead and found in no tier
  std::string reading_;                         // id being read now ("" = none)
  bool read_cancelled_ = false;                 // the read in flight went stale: not kept
  int64_t prefetches_ = 0, prefetch_hits_ = 0;
  bool stop_ = false;
  std::set<std::string> unpublished_;  // sessions whose latest state Redis did not take
  int64_t write_errors_ = 0;
  double write_seconds_ = 0;
  int64_t disk_sessions_ = 0, disk_bytes_ = 0;  // snapshots for stats()
  RedisStoreStats redis_stats_;
  std::mutex io_mu_;  // serialises disk_ and redis_ calls between the writer and the engine thread
  std::thread writer_;
};

}  // namespace tangram
