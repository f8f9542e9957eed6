#include "store/session_tiers.h"

#include "store/session_codec.h"

#include <algorithm>
#include <chrono>

namespace tangram {

Result<std::unique_ptr<SessionTiers>> SessionTiers::create(SessionTierOptions options) {
  auto t = std::make_unique<SessionTiers>();
  t->host_cap_ = options.host_bytes;
  if (!options.disk_dir.empty()) {
    TG_ASSIGN(t->disk_, SessionDiskStore::open(options.disk_dir, options.disk_bytes));
  }
  if (options.redis) {
    TG_ASSIGN(t->redis_, SessionRedisStore::open(std::move(*options.redis)));
  }
  {
    std::lock_guard io(t->io_mu_);
    t->snapshot_io_stats();
  }
  if (t->writes_through()) t->writer_ = std::thread([raw = t.get()] { raw->io_loop(); });
  return t;
}

SessionTiers::~SessionTiers() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (writer_.joinable()) writer_.join();  // the writer drains the queue first
}

void SessionTiers::snapshot_io_stats() {
  if (disk_) {
    disk_sessions_ = disk_->sessions();
    disk_bytes_ = static_cast<int64_t>(disk_->bytes());
  }
  if (redis_) redis_stats_ = redis_->stats();
}

void SessionTiers::io_loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !pending_.empty() || !to_read_.empty(); });
    if (!to_read_.empty()) {
      // Reads first: a request is waiting on them.
      const std::string id = std::move(to_read_.front());
      to_read_.pop_front();
      if (pending_.count(id) > 0 || prefetched_.count(id) > 0) continue;
      reading_ = id;
      read_cancelled_ = false;
      lock.unlock();
      std::optional<Fetched> got;
      {
        std::lock_guard io(io_mu_);
        if (disk_ && disk_->contains(id)) {
          auto blob = disk_->get(id);
          if (blob) got = Fetched{std::move(blob).value(), "disk"};
        }
        if (!got && redis_) {
          auto blob = redis_->get(id);
          if (blob && blob->has_value()) got = Fetched{std::move(**blob), "redis"};
        }
        snapshot_io_stats();
      }
      lock.lock();
      if (!read_cancelled_) {
        if (got)
          prefetched_.emplace(id, std::move(*got));
        else
          absent_.insert(id);  // in no tier: the admission need not look again
      }
      reading_.clear();
      done_.notify_all();
      continue;
    }
    if (pending_.empty()) return;  // stopping, and everything is written
    auto it = pending_.begin();
    const std::string id = it->first;
    const std::string blob = std::move(it->second);
    pending_.erase(it);
    writing_ = id;
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    bool disk_ok = true, redis_ok = true;
    {
      std::lock_guard io(io_mu_);
      if (disk_) disk_ok = disk_->put(id, blob).ok();
      if (redis_) redis_ok = redis_->put(id, blob).ok();
      snapshot_io_stats();
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    lock.lock();
    writing_.clear();
    write_seconds_ += seconds;
    write_errors_ += (disk_ok ? 0 : 1) + (redis_ok ? 0 : 1);
    if (redis_) {
      if (redis_ok)
        unpublished_.erase(id);
      else
        unpublished_.insert(id);
    }
    done_.notify_all();
  }
}

void SessionTiers::forget_prefetch(const std::string& id) {
  prefetched_.erase(id);
  absent_.erase(id);
  to_read_.erase(std::remove(to_read_.begin(), to_read_.end(), id), to_read_.end());
  if (reading_ == id) read_cancelled_ = true;  // the read in flight is not kept
}

void SessionTiers::prefetch(const std::string& id) {
  if (!writes_through() || host_.count(id) > 0) return;
  {
    std::lock_guard lock(mu_);
    absent_.erase(id);  // looked for afresh: another replica may have written it since
    if (pending_.count(id) > 0 || prefetched_.count(id) > 0 || reading_ == id) return;
    to_read_.push_back(id);
    ++prefetches_;
  }
  wake_.notify_one();
}

void SessionTiers::persist(const std::string& id, std::string blob) {
  if (!writes_through()) return;
  {
    std::lock_guard lock(mu_);
    pending_[id] = std::move(blob);  // a newer state replaces a queued one
    forget_prefetch(id);
  }
  wake_.notify_one();
}

void SessionTiers::wait_unless_writing(std::unique_lock<std::mutex>& lock, const std::string& id) {
  done_.wait(lock, [&] { return writing_ != id && reading_ != id; });
}

bool SessionTiers::wait_written(const std::string& id, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return done_.wait_for(lock, timeout, [&] { return pending_.count(id) == 0 && writing_ != id; });
}

void SessionTiers::flush() {
  std::unique_lock lock(mu_);
  done_.wait(lock, [&] { return pending_.empty() && writing_.empty(); });
}

void SessionTiers::offload(const std::string& id, std::string blob) {
  // Drop the local copies only: Redis's (written through after the turn) is this same state.
  if (auto it = host_.find(id); it != host_.end()) {
    host_used_ -= it->second.first.size();
    host_lru_.erase(it->second.second);
    host_.erase(it);
  }
  ++counters_.offloads;
  bool republish = false;
  {
    std::lock_guard lock(mu_);
    republish = redis_ && unpublished_.count(id) > 0 && pending_.count(id) == 0;
    forget_prefetch(id);
  }
  if (republish) persist(id, blob);  // its last write-through did not reach Redis
  if (blob.size() <= host_cap_) {
    while (host_used_ + blob.size() > host_cap_ && !host_lru_.empty()) {
      // Demote the least recently used blob to disk (or drop it).
      auto it = host_.find(host_lru_.front());
      bool demoted = false;
      if (disk_) {
        std::lock_guard io(io_mu_);
        demoted = disk_->put(it->first, it->second.first).ok();
        snapshot_io_stats();
      }
      ++(demoted ? counters_.demotions : counters_.dropped);
      host_used_ -= it->second.first.size();
      host_lru_.pop_front();
      host_.erase(it);
    }
    host_used_ += blob.size();
    host_lru_.push_back(id);
    host_.emplace(id, std::make_pair(std::move(blob), std::prev(host_lru_.end())));
    return;
  }
  bool stored = false;
  if (disk_) {
    std::lock_guard io(io_mu_);
    stored = disk_->put(id, blob).ok();
    snapshot_io_stats();
  }
  if (!stored) ++counters_.dropped;
}

std::optional<SessionTiers::Fetched> SessionTiers::fetch(const std::string& id) {
  if (auto it = host_.find(id); it != host_.end()) {
    Fetched f{std::move(it->second.first), "host"};
    host_used_ -= f.blob.size();
    host_lru_.erase(it->second.second);
    host_.erase(it);
    return f;
  }
  {
    // Queued for the writer: still in host memory, and the newest state.
    std::unique_lock lock(mu_);
    if (auto it = pending_.find(id); it != pending_.end()) return Fetched{it->second, "host"};
    wait_unless_writing(lock, id);  // also lets a read-ahead of it land
    if (auto it = prefetched_.find(id); it != prefetched_.end()) {
      Fetched f = std::move(it->second);
      prefetched_.erase(it);
      ++prefetch_hits_;
      return f;
    }
    if (absent_.erase(id) > 0) return std::nullopt;  // the read-ahead found it nowhere
  }
  std::lock_guard io(io_mu_);  // also waits for a write of this id in progress
  if (disk_ && disk_->contains(id)) {
    auto blob = disk_->get(id);
    if (blob) return Fetched{std::move(blob).value(), "disk"};
  }
  if (redis_) {
    auto blob = redis_->get(id);
    snapshot_io_stats();
    if (blob && blob->has_value()) return Fetched{std::move(**blob), "redis"};
  }
  return std::nullopt;
}

SessionTiers::Location SessionTiers::where(const std::string& id) {
  if (auto it = host_.find(id); it != host_.end())
    return {"host", static_cast<int64_t>(it->second.first.size())};
  {
    std::unique_lock lock(mu_);
    if (auto it = pending_.find(id); it != pending_.end())  // as good as written
      return {disk_ ? "disk" : "redis", static_cast<int64_t>(it->second.size())};
    wait_unless_writing(lock, id);
  }
  std::lock_guard io(io_mu_);
  if (disk_ && disk_->contains(id)) return {"disk", static_cast<int64_t>(disk_->size_of(id))};
  if (redis_) {
    auto bytes = redis_->size_of(id);
    snapshot_io_stats();
    if (bytes && *bytes > 0) return {"redis", *bytes};
  }
  return {};
}

void SessionTiers::erase(const std::string& id) {
  if (auto it = host_.find(id); it != host_.end()) {
    host_used_ -= it->second.first.size();
    host_lru_.erase(it->second.second);
    host_.erase(it);
  }
  {
    std::unique_lock lock(mu_);
    pending_.erase(id);
    unpublished_.erase(id);
    forget_prefetch(id);
    wait_unless_writing(lock, id);  // a write already under way lands first, then is deleted
  }
  std::lock_guard io(io_mu_);
  if (disk_) (void)disk_->erase(id);
  if (redis_) (void)redis_->erase(id);
  snapshot_io_stats();
}

std::vector<std::pair<std::string, std::vector<int32_t>>> SessionTiers::disk_sessions() {
  std::vector<std::pair<std::string, std::vector<int32_t>>> out;
  if (!disk_) return out;
  std::lock_guard io(io_mu_);
  for (const auto& f : disk_->list()) {
    std::vector<int32_t> tokens;
    if (auto head = disk_->peek(f.id, kSessionHeaderBytes); head.ok())
      if (auto n = session_summary_bytes(*head); n.ok())
        if (auto prefix = disk_->peek(f.id, *n); prefix.ok())
          if (auto summary = inspect_session(*prefix); summary.ok())
            tokens = std::move(summary->tokens);
    out.emplace_back(f.id, std::move(tokens));
  }
  return out;
}

SessionTierStats SessionTiers::stats() const {
  SessionTierStats s = counters_;
  s.host_sessions = static_cast<int64_t>(host_.size());
  s.host_bytes = static_cast<int64_t>(host_used_);
  std::lock_guard lock(mu_);
  for (const auto& [id, blob] : pending_) {
    ++s.host_sessions;
    s.host_bytes += static_cast<int64_t>(blob.size());
  }
  s.disk_sessions = disk_sessions_;
  s.disk_bytes = disk_bytes_;
  s.write_seconds = write_seconds_;
  s.prefetches = prefetches_;
  s.prefetch_hits = prefetch_hits_;
  s.write_errors = write_errors_;
  if (redis_) {
    s.redis_enabled = true;
    s.redis = redis_stats_;
  }
  return s;
}

}  // namespace tangram
