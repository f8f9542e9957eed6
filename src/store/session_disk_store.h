// A directory of serialised sessions on local disk, bounded in size, that survives restarts.
//
// One file per session, named by the XXH3-128 hash of its id in hex ("<32 hex>.kvs"), so an id
// of any bytes ("../x", "a/b", NUL) never reaches the file system as a path. The file starts with
// a small frame that repeats the id (checked against the name on open and on every get), then
// the blob as given:
//   [0, 8) magic "TGKVDISK"   [8, 12) u32 id bytes   [12, 12 + id) id   then the blob
// The blob's own integrity is session_codec's job (decode_session detects a corrupt or truncated
// blob); the store only guarantees that a get returns what the file holds for that id.
//
// Writes are atomic: the file is written to "<name>.tmp" in the same directory, fsynced, renamed
// over the old one and the directory fsynced, so after a crash a session is either its old or its
// new version, never a mix. open() removes temp files a crash left behind. Files of other names
// in the directory are left alone. When the files would
// exceed max_bytes, the least recently used sessions (last put or get; kept in the files' mtimes
// so the order survives restarts) are deleted first.
//
// One store per directory: open() takes an exclusive lock (flock on "LOCK") and fails if another
// store, in this or another process, holds it. Calls are serialised by a mutex; the file I/O runs
// under it, so call from a background thread, not the serving path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace tangram {

struct SessionFileInfo {
  std::string id;
  uint64_t bytes = 0;          // the file's size (frame + blob): what counts against the cap
  int64_t last_access_ns = 0;  // the file's mtime: last put or get, ns since the Unix epoch
};

struct DiskStoreOpenReport {
  int64_t sessions = 0;         // session files found and kept
  uint64_t bytes = 0;           // their total size
  int64_t temp_removed = 0;     // "<32 hex>.kvs.tmp" files left by an interrupted write
  int64_t corrupt_removed = 0;  // session files whose frame is unreadable or names another id
  int64_t evicted = 0;          // sessions deleted because the files exceeded max_bytes
  int64_t skipped = 0;  // named like session files but not regular files (FIFOs, links): left alone
};

class SessionDiskStore {
 public:
  // Longest session id accepted, in bytes.
  static constexpr size_t kMaxIdBytes = 4096;

  // Opens (creating it if needed) `dir`, takes its lock, removes leftover temp files and corrupt
  // session files, indexes the rest, and evicts down to max_bytes. Errors: the directory cannot
  // be created or read, another store holds it, max_bytes is 0.
  static Result<std::unique_ptr<SessionDiskStore>> open(const std::filesystem::path& dir,
                                                        uint64_t max_bytes);
  ~SessionDiskStore();
  SessionDiskStore(const SessionDiskStore&) = delete;
  SessionDiskStore& operator=(const SessionDiskStore&) = delete;

  // Stores (or replaces) a session atomically, first deleting least recently used others until
  // it fits. Errors (nothing changed but evictions): an empty or too long id, a file larger than
  // max_bytes on its own, an I/O failure (the temp file is removed).
  Status put(std::string_view id, std::string_view blob);
  // The blob stored for id, marking it most recently used. Errors: unknown id, or a file that is
  // gone or whose frame is damaged (the entry is then dropped and the file removed).
  Result<std::string> get(std::string_view id);
  // The first max_bytes of the blob (all of it if shorter), without marking it used: for reading
  // a session's header and tokens at start-up. Errors as get().
  Result<std::string> peek(std::string_view id, size_t max_bytes);
  // Deletes a session; false if there was none.
  Result<bool> erase(std::string_view id);
  bool contains(std::string_view id) const;
  // The size of id's file (frame and blob), or 0 when there is none.
  uint64_t size_of(std::string_view id) const;
  // Every session, most recently used first.
  std::vector<SessionFileInfo> list() const;

  uint64_t bytes() const;
  int64_t sessions() const;  // how many are stored
  uint64_t max_bytes() const { return max_bytes_; }
  int64_t evictions() const;
  const DiskStoreOpenReport& open_report() const { return open_report_; }
  const std::filesystem::path& dir() const { return dir_; }

  // The file name an id is stored under (exposed for tests and tools).
  static std::string file_name(std::string_view id);

 private:
  struct Entry {
    std::string file;  // name within dir_
    uint64_t bytes = 0;
    int64_t last_access_ns = 0;
    uint64_t tick = 0;  // LRU order: larger is more recent
  };

  SessionDiskStore(std::filesystem::path dir, uint64_t max_bytes, int lock_fd);
  Status scan();
  Result<std::string> read(std::string_view id, size_t max_bytes, bool touch);
  // Deletes LRU sessions other than `keep` until `incoming` more bytes fit. Caller holds mu_.
  Status evict_for(uint64_t incoming, std::string_view keep);
  Status remove_entry(std::map<std::string, Entry, std::less<>>::iterator it);

  std::filesystem::path dir_;
  uint64_t max_bytes_;
  int lock_fd_;
  int dir_fd_ = -1;
  mutable std::mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_;  // by id
  uint64_t bytes_ = 0;
  uint64_t next_tick_ = 1;
  int64_t evictions_ = 0;
  DiskStoreOpenReport open_report_;
};

}  // namespace tangram
