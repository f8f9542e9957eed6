// Conversations whose KV stays resident between turns.
//
// A session is a key (the caller's session id, or one made up for an anonymous request), the
// tokens whose keys and values its cache holds, and the cache itself while resident. While a
// request of the session runs, the request owns the cache (the session is "busy"); when it
// finishes, the cache comes back here. Under memory pressure the scheduler evicts idle caches
// least recently used first; the session entry stays (an evicted session simply has no
// cache, so its next turn is prefilled from its full prompt, transparently).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kv/paged_kv_cache.h"

namespace tangram {

struct Session {
  std::string id;
  bool anonymous = false;               // id made up by the engine, not given by a caller
  std::vector<int32_t> tokens;          // tokens whose K/V `cache` holds, in order
  std::unique_ptr<PagedKvCache> cache;  // null: evicted, or lent to a running request
  bool busy = false;                    // a request of this session is queued or running
  uint64_t last_used = 0;               // scheduler tick of the last return
  std::chrono::steady_clock::time_point idle_since{};  // time of the last return
};

class SessionStore {
 public:
  explicit SessionStore(size_t max_sessions) : max_sessions_(max_sessions) {}

  Session* find(const std::string& id);
  const Session* find(const std::string& id) const;
  // Finds or creates the entry (may drop the least recently used idle entries past the cap).
  Session& get_or_create(const std::string& id, bool anonymous);
  // A fresh anonymous id.
  std::string new_anonymous_id();

  // The idle resident session a prompt can continue without an id: the one sharing the
  // longest token prefix with it, provided the prefix is at least min_prefix tokens and either
  // covers the session's whole history (a pure continuation: nothing of the session is lost) or
  // the session is anonymous. Null if none.
  Session* match_prefix(const std::vector<int32_t>& prompt, int64_t min_prefix);

  // Drops the cache of the least recently used idle resident session; returns the pages it
  // freed, or -1 when no idle session holds a cache.
  int64_t evict_lru();
  // The session evict_lru() would take (null if none), and the count of an eviction done by hand.
  Session* lru_idle_resident();
  // Idle resident sessions whose last return was before `cutoff`, least recently used first.
  std::vector<Session*> idle_resident_before(std::chrono::steady_clock::time_point cutoff);
  void count_eviction() { ++evictions_; }
  // Drops the cache of every idle session; returns pages freed.
  int64_t evict_all_idle();
  bool erase(const std::string& id);  // false if unknown or busy

  template <typename F>
  void for_each(F&& f) const {
    for (const auto& [id, s] : sessions_) f(s);
  }
  size_t size() const { return sessions_.size(); }
  size_t resident() const;
  int64_t evictions() const { return evictions_; }

 private:
  size_t max_sessions_;
  std::map<std::string, Session> sessions_;
  uint64_t next_anonymous_ = 1;
  int64_t evictions_ = 0;
};

// Length of the common prefix of a and b.
size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b);

}  // namespace tangram
