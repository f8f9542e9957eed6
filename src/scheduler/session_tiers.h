// Where idle sessions' KV goes when the resident pool needs their pages: a host-memory spill
// area (bounded, least recently used first out) and, optionally, a local disk directory
// (bounded, crash-safe). A session moved down is restored on its next turn by decoding its blob
// into the pool, instead of being recomputed from its tokens.
//
// Blobs are session_codec's serialised form (checksummed, fingerprinted): a blob that no longer
// decodes (another model, a corrupt file) is dropped and the turn is recomputed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/result.h"
#include "kv/session_disk_store.h"

namespace tangram {

struct SessionTierStats {
  int64_t host_sessions = 0;
  int64_t host_bytes = 0;
  int64_t disk_sessions = 0;
  int64_t disk_bytes = 0;
  int64_t offloads = 0;        // blobs put into a tier
  int64_t demotions = 0;       // host -> disk moves
  int64_t dropped = 0;         // blobs that fit no tier (their sessions will be recomputed)
  int64_t restores = 0;        // blobs decoded back into the pool
  int64_t restore_failures = 0;  // blobs refused on restore (fingerprint, corruption): recomputed
  double offload_seconds = 0;  // encoding and storing
  double restore_seconds = 0;  // fetching and decoding
};

class SessionTiers {
 public:
  // host_bytes: the spill area's cap (0: none). disk_dir empty: no disk tier.
  static Result<std::unique_ptr<SessionTiers>> create(size_t host_bytes, const std::filesystem::path& disk_dir,
                                                      uint64_t disk_bytes);

  // Stores a session's blob: in host memory when it fits (demoting least recently used blobs to
  // disk, or dropping them without a disk tier), else on disk, else nowhere (counted).
  void offload(const std::string& id, std::string blob);
  // Writes the blob to disk only (write-through after a turn, so a crash loses at most the turn
  // in flight). No-op without a disk tier.
  Status persist(const std::string& id, std::string_view blob);
  // Takes a session's blob out of the host tier, or reads it from disk (which keeps its copy).
  std::optional<std::string> fetch(const std::string& id);
  bool contains(const std::string& id) const;
  // "host", "disk" or "none".
  std::string where(const std::string& id) const;
  void erase(const std::string& id);
  bool has_disk() const { return disk_ != nullptr; }
  // Ids of the sessions on disk (found at start-up, for example), most recently used first.
  std::vector<std::string> disk_ids() const;

  SessionTierStats stats() const;
  SessionTierStats& counters() { return counters_; }

 private:
  size_t host_cap_ = 0;
  size_t host_used_ = 0;
  std::list<std::string> host_lru_;  // front = least recently used
  std::map<std::string, std::pair<std::string, std::list<std::string>::iterator>> host_;
  std::unique_ptr<SessionDiskStore> disk_;
  SessionTierStats counters_;
};

}  // namespace tangram
