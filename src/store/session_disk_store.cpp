#include "store/session_disk_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include <xxhash.h>

#include <fmt/format.h>

namespace tangram {

namespace {

constexpr std::string_view kFrameMagic = "TGKVDISK";
constexpr size_t kFrameFixed = 12;  // magic + u32 id length
constexpr std::string_view kSuffix = ".kvs";
constexpr std::string_view kTempSuffix = ".tmp";

std::string errno_text() { return std::generic_category().message(errno); }

// Opens a file for reading without following a link and without blocking (a FIFO opens at once
// instead of waiting for a writer); the caller checks with fstat that it is a regular file.
int open_regular(const std::string& path) {
  return ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
}

void log_warn(const std::string& message) {
  fmt::print(stderr, "level=warn event=kv_disk msg=\"{}\"\n", message);
}

// Owns a file descriptor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  // Closes now, reporting the error close() gives (data not written back).
  int close_checked() {
    const int r = fd_ >= 0 ? ::close(fd_) : 0;
    fd_ = -1;
    return r;
  }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

timespec to_timespec(int64_t ns) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(ns / 1000000000);
  ts.tv_nsec = static_cast<long>(ns % 1000000000);
  return ts;
}

int64_t mtime_ns(const struct stat& st) {
  return int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
}

Status write_all(int fd, const char* p, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return make_error("write {}: {}", path, errno_text());
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

// Reads exactly n bytes at offset; an error if the file ends first.
Status read_at(int fd, char* p, size_t n, uint64_t offset, const std::string& path) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return make_error("read {}: {}", path, errno_text());
    if (r == 0) return make_error("read {}: the file ends at byte {}", path, offset);
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return Status::Ok();
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The id a session file's frame names, checked against the file's name and size.
Result<std::string> read_frame_id(int fd, uint64_t file_bytes, std::string_view file,
                                  const std::string& path) {
  char fixed[kFrameFixed];
  if (file_bytes < kFrameFixed)
    return make_error("{}: {} bytes, too short for a frame", path, file_bytes);
  TG_TRY(read_at(fd, fixed, kFrameFixed, 0, path));
  if (std::string_view(fixed, kFrameMagic.size()) != kFrameMagic)
    return make_error("{}: bad magic", path);
  uint32_t id_bytes = 0;
  std::memcpy(&id_bytes, fixed + kFrameMagic.size(), sizeof(id_bytes));
  if (id_bytes == 0 || id_bytes > SessionDiskStore::kMaxIdBytes ||
      kFrameFixed + id_bytes > file_bytes)
    return make_error("{}: bad id length {}", path, id_bytes);
  std::string id(id_bytes, '\0');
  TG_TRY(read_at(fd, id.data(), id_bytes, kFrameFixed, path));
  if (SessionDiskStore::file_name(id) != file)
    return make_error("{}: the frame names another id", path);
  return id;
}

}  // namespace

std::string SessionDiskStore::file_name(std::string_view id) {
  const XXH128_hash_t h = XXH3_128bits(id.data(), id.size());
  return fmt::format("{:016x}{:016x}{}", h.high64, h.low64, kSuffix);
}

SessionDiskStore::SessionDiskStore(std::filesystem::path dir, uint64_t max_bytes, int lock_fd)
    : dir_(std::move(dir)), max_bytes_(max_bytes), lock_fd_(lock_fd) {}

SessionDiskStore::~SessionDiskStore() {
  if (dir_fd_ >= 0) ::close(dir_fd_);
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

Result<std::unique_ptr<SessionDiskStore>> SessionDiskStore::open(const std::filesystem::path& dir,
                                                                 uint64_t max_bytes) {
  if (max_bytes == 0) return make_error("session disk store {}: the size cap is 0", dir.string());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error("session disk store {}: {}", dir.string(), ec.message());
  const std::string lock_path = (dir / "LOCK").string();
  Fd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!lock.ok()) return make_error("session disk store: open {}: {}", lock_path, errno_text());
  if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0)
    return make_error("session disk store {}: in use by another store ({})", dir.string(),
                      errno_text());
  // The store owns the lock from here; its destructor closes it, which releases the flock.
  std::unique_ptr<SessionDiskStore> s(new SessionDiskStore(dir, max_bytes, lock.release()));
  s->dir_fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (s->dir_fd_ < 0)
    return make_error("session disk store: open {}: {}", dir.string(), errno_text());
  TG_TRY(s->scan());
  return s;
}

Status SessionDiskStore::scan() {
  std::lock_guard<std::mutex> lock(mu_);
  std::error_code ec;
  std::vector<std::pair<std::string, Entry>> found;
  for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string path = it->path().string();
    const bool temp =
        name.size() == 32 + kSuffix.size() + kTempSuffix.size() && ends_with(name, ".kvs.tmp");
    if (!temp && (!ends_with(name, kSuffix) || name.size() != 32 + kSuffix.size()))
      continue;  // not ours
    // Only regular files are opened, and never blocking: a FIFO, a device or a link named like a
    // session would otherwise hang the start (open of a FIFO waits for a writer) or lead elsewhere.
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec) || it->is_symlink(type_ec)) {
      ++open_report_.skipped;
      log_warn(fmt::format("skipped {}: not a regular file (left as it is)", path));
      continue;
    }
    if (temp) {
      if (::unlink(path.c_str()) == 0) {
        ++open_report_.temp_removed;
        log_warn(fmt::format("removed {}: left by an interrupted write", path));
      }
      continue;
    }
    Fd fd(open_regular(path));
    struct stat st {};
    if (!fd.ok() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      ++open_report_.skipped;
      log_warn(fmt::format("skipped {}: cannot be opened as a regular file", path));
      continue;
    }
    Result<std::string> id = read_frame_id(fd.get(), static_cast<uint64_t>(st.st_size), name, path);
    if (!id.ok()) {
      if (::unlink(path.c_str()) == 0) {
        ++open_report_.corrupt_removed;
        log_warn(fmt::format("removed {}: {}", path, id.message()));
      }
      continue;
    }
    Entry e;
    e.file = name;
    e.bytes = static_cast<uint64_t>(st.st_size);
    e.last_access_ns = mtime_ns(st);
    found.emplace_back(std::move(id).value(), std::move(e));
  }
  if (ec) return make_error("session disk store: read {}: {}", dir_.string(), ec.message());
  // Ticks follow the mtimes, so LRU order survives the restart.
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return a.second.last_access_ns < b.second.last_access_ns;
  });
  for (auto& [id, e] : found) {
    e.tick = next_tick_++;
    bytes_ += e.bytes;
    entries_.emplace(std::move(id), std::move(e));
  }
  const int64_t before = evictions_;
  TG_TRY(evict_for(0, {}));
  open_report_.evicted = evictions_ - before;
  open_report_.sessions = static_cast<int64_t>(entries_.size());
  open_report_.bytes = bytes_;
  return Status::Ok();
}

Status SessionDiskStore::remove_entry(std::map<std::string, Entry, std::less<>>::iterator it) {
  const std::string path = (dir_ / it->second.file).string();
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return make_error("session disk store: remove {}: {}", path, errno_text());
  bytes_ -= it->second.bytes;
  entries_.erase(it);
  return Status::Ok();
}

Status SessionDiskStore::evict_for(uint64_t incoming, std::string_view keep) {
  bool removed = false;
  while (bytes_ + incoming > max_bytes_) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->first != keep && (victim == entries_.end() || it->second.tick < victim->second.tick))
        victim = it;
    if (victim == entries_.end()) break;
    TG_TRY(remove_entry(victim));
    ++evictions_;
    removed = true;
  }
  if (removed) ::fsync(dir_fd_);  // the deletions are durable before new data relies on the room
  return Status::Ok();
}

Status SessionDiskStore::put(std::string_view id, std::string_view blob) {
  if (id.empty() || id.size() > kMaxIdBytes)
    return make_error("session disk store: session id of {} bytes (1 to {} allowed)", id.size(),
                      kMaxIdBytes);
  const uint64_t file_bytes = kFrameFixed + id.size() + blob.size();
  if (file_bytes > max_bytes_)
    return make_error("session disk store: a session of {} bytes exceeds the cap of {}", file_bytes,
                      max_bytes_);
  std::lock_guard<std::mutex> lock(mu_);
  const auto existing = entries_.find(id);
  const uint64_t replaced = existing != entries_.end() ? existing->second.bytes : 0;
  // Room for the new file while the old version (if any) still counts until the rename.
  TG_TRY(evict_for(file_bytes > replaced ? file_bytes - replaced : 0, id));
  const std::string name = file_name(id);
  const std::string path = (dir_ / name).string();
  const std::string temp = path + std::string(kTempSuffix);
  Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.ok()) return make_error("session disk store: create {}: {}", temp, errno_text());
  char fixed[kFrameFixed];
  std::memcpy(fixed, kFrameMagic.data(), kFrameMagic.size());
  const auto id_bytes = static_cast<uint32_t>(id.size());
  std::memcpy(fixed + kFrameMagic.size(), &id_bytes, sizeof(id_bytes));
  const int64_t now = now_ns();
  const timespec times[2] = {to_timespec(now), to_timespec(now)};
  Status s = write_all(fd.get(), fixed, kFrameFixed, temp);
  if (s.ok()) s = write_all(fd.get(), id.data(), id.size(), temp);
  if (s.ok()) s = write_all(fd.get(), blob.data(), blob.size(), temp);
  if (s.ok() && ::futimens(fd.get(), times) != 0)
    s = make_error("set time of {}: {}", temp, errno_text());
  if (s.ok() && ::fsync(fd.get()) != 0) s = make_error("fsync {}: {}", temp, errno_text());
  if (s.ok() && fd.close_checked() != 0) s = make_error("close {}: {}", temp, errno_text());
  if (s.ok() && ::rename(temp.c_str(), path.c_str()) != 0)
    s = make_error("rename {} to {}: {}", temp, path, errno_text());
  if (!s.ok()) {
    fd.reset();
    ::unlink(temp.c_str());
    return make_error("session disk store: {}", s.message());
  }
  if (::fsync(dir_fd_) != 0)
    return make_error("session disk store: fsync {}: {}", dir_.string(), errno_text());
  Entry e;
  e.file = name;
  e.bytes = file_bytes;
  e.last_access_ns = now;
  e.tick = next_tick_++;
  bytes_ = bytes_ - replaced + file_bytes;
  entries_.insert_or_assign(std::string(id), std::move(e));
  return Status::Ok();
}

Result<std::string> SessionDiskStore::get(std::string_view id) {
  return read(id, SIZE_MAX, /*touch=*/true);
}

Result<std::string> SessionDiskStore::peek(std::string_view id, size_t max_bytes) {
  return read(id, max_bytes, /*touch=*/false);
}

Result<std::string> SessionDiskStore::read(std::string_view id, size_t max_bytes, bool touch) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return make_error("session disk store: no session with that id");
  const std::string path = (dir_ / it->second.file).string();
  Fd fd(open_regular(path));
  struct stat st {};
  if (!fd.ok() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string why = fd.ok() && st.st_mode != 0 && !S_ISREG(st.st_mode)
                                ? std::string("not a regular file")
                                : errno_text();
    bytes_ -= it->second.bytes;
    entries_.erase(it);
    return make_error("session disk store: open {}: {}", path, why);
  }
  const auto file_bytes = static_cast<uint64_t>(st.st_size);
  Result<std::string> frame_id = read_frame_id(fd.get(), file_bytes, it->second.file, path);
  if (!frame_id.ok() || *frame_id != id) {
    const std::string why =
        frame_id.ok() ? std::string("the frame names another id") : frame_id.message();
    fd.reset();
    TG_TRY(remove_entry(it));
    return make_error("session disk store: damaged file removed: {}", why);
  }
  const uint64_t offset = kFrameFixed + id.size();
  std::string blob;
  try {
    blob.resize(static_cast<size_t>(std::min<uint64_t>(file_bytes - offset, max_bytes)));
  } catch (const std::bad_alloc&) {
    return make_error("session disk store: out of host memory for {} bytes", file_bytes - offset);
  }
  TG_TRY(read_at(fd.get(), blob.data(), blob.size(), offset, path));
  if (!touch) return blob;
  // Most recently used, in memory and (for the next start) in the file's mtime.
  const int64_t now = now_ns();
  const timespec times[2] = {to_timespec(now), to_timespec(now)};
  ::futimens(fd.get(), times);
  it->second.last_access_ns = now;
  it->second.tick = next_tick_++;
  bytes_ =
      bytes_ - it->second.bytes + file_bytes;  // the file may have changed size behind our back
  it->second.bytes = file_bytes;
  return blob;
}

Result<bool> SessionDiskStore::erase(std::string_view id) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  TG_TRY(remove_entry(it));
  ::fsync(dir_fd_);  // a deleted conversation stays deleted after a crash
  return true;
}

bool SessionDiskStore::contains(std::string_view id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.find(id) != entries_.end();
}

uint64_t SessionDiskStore::size_of(std::string_view id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = entries_.find(id);
  return it == entries_.end() ? 0 : it->second.bytes;
}

std::vector<SessionFileInfo> SessionDiskStore::list() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<uint64_t, SessionFileInfo>> v;
  v.reserve(entries_.size());
  for (const auto& [id, e] : entries_)
    v.push_back({e.tick, SessionFileInfo{id, e.bytes, e.last_access_ns}});
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<SessionFileInfo> out;
  out.reserve(v.size());
  for (auto& [tick, info] : v) out.push_back(std::move(info));
  return out;
}

uint64_t SessionDiskStore::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

int64_t SessionDiskStore::sessions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(entries_.size());
}

int64_t SessionDiskStore::evictions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return evictions_;
}

}  // namespace tangram
