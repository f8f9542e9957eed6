#include "scheduler/session_tiers.h"

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
  return t;
}

void SessionTiers::offload(const std::string& id, std::string blob) {
  // Drop the local copies only: Redis's (written through after the turn) is this same state.
  if (auto it = host_.find(id); it != host_.end()) {
    host_used_ -= it->second.first.size();
    host_lru_.erase(it->second.second);
    host_.erase(it);
  }
  ++counters_.offloads;
  if (redis_ && unpublished_.count(id) > 0 && redis_->put(id, blob).ok()) unpublished_.erase(id);
  if (blob.size() <= host_cap_) {
    while (host_used_ + blob.size() > host_cap_ && !host_lru_.empty()) {
      // Demote the least recently used blob to disk (or drop it).
      auto it = host_.find(host_lru_.front());
      if (disk_ && disk_->put(it->first, it->second.first).ok())
        ++counters_.demotions;
      else
        ++counters_.dropped;
      host_used_ -= it->second.first.size();
      host_lru_.pop_front();
      host_.erase(it);
    }
    host_used_ += blob.size();
    host_lru_.push_back(id);
    host_.emplace(id, std::make_pair(std::move(blob), std::prev(host_lru_.end())));
    return;
  }
  if (!disk_ || !disk_->put(id, blob).ok()) ++counters_.dropped;
}

Status SessionTiers::persist(const std::string& id, std::string_view blob) {
  Status result;
  if (disk_) result = disk_->put(id, blob);
  if (redis_) {
    Status st = redis_->put(id, blob);
    if (st.ok()) {
      unpublished_.erase(id);
    } else {
      unpublished_.insert(id);
      if (result.ok()) result = st;
    }
  }
  return result;
}

std::optional<SessionTiers::Fetched> SessionTiers::fetch(const std::string& id) {
  if (auto it = host_.find(id); it != host_.end()) {
    Fetched f{std::move(it->second.first), "host"};
    host_used_ -= f.blob.size();
    host_lru_.erase(it->second.second);
    host_.erase(it);
    return f;
  }
  if (disk_ && disk_->contains(id)) {
    auto blob = disk_->get(id);
    if (blob) return Fetched{std::move(blob).value(), "disk"};
  }
  if (redis_) {
    auto blob = redis_->get(id);
    if (blob && blob->has_value()) return Fetched{std::move(**blob), "redis"};
  }
  return std::nullopt;
}

std::string SessionTiers::where(const std::string& id) {
  if (host_.count(id) > 0) return "host";
  if (disk_ && disk_->contains(id)) return "disk";
  if (redis_) {
    auto in = redis_->contains(id);
    if (in && *in) return "redis";
  }
  return "none";
}

void SessionTiers::erase(const std::string& id) {
  if (auto it = host_.find(id); it != host_.end()) {
    host_used_ -= it->second.first.size();
    host_lru_.erase(it->second.second);
    host_.erase(it);
  }
  if (disk_) (void)disk_->erase(id);
  if (redis_) (void)redis_->erase(id);
  unpublished_.erase(id);
}

std::vector<std::string> SessionTiers::disk_ids() const {
  std::vector<std::string> ids;
  if (disk_)
    for (const auto& f : disk_->list()) ids.push_back(f.id);
  return ids;
}

SessionTierStats SessionTiers::stats() const {
  SessionTierStats s = counters_;
  s.host_sessions = static_cast<int64_t>(host_.size());
  s.host_bytes = static_cast<int64_t>(host_used_);
  if (disk_) {
    s.disk_sessions = disk_->sessions();
    s.disk_bytes = static_cast<int64_t>(disk_->bytes());
  }
  if (redis_) {
    s.redis_enabled = true;
    s.redis = redis_->stats();
  }
  return s;
}

}  // namespace tangram
