#include "scheduler/session_tiers.h"

namespace tangram {

Result<std::unique_ptr<SessionTiers>> SessionTiers::create(size_t host_bytes, const std::filesystem::path& disk_dir,
                                                           uint64_t disk_bytes) {
  auto t = std::make_unique<SessionTiers>();
  t->host_cap_ = host_bytes;
  if (!disk_dir.empty()) {
    TG_ASSIGN(t->disk_, SessionDiskStore::open(disk_dir, disk_bytes));
  }
  return t;
}

void SessionTiers::offload(const std::string& id, std::string blob) {
  erase(id);
  ++counters_.offloads;
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
  if (!disk_) return Status::Ok();
  return disk_->put(id, blob);
}

std::optional<std::string> SessionTiers::fetch(const std::string& id) {
  if (auto it = host_.find(id); it != host_.end()) {
    std::string blob = std::move(it->second.first);
    host_used_ -= blob.size();
    host_lru_.erase(it->second.second);
    host_.erase(it);
    return blob;
  }
  if (disk_ && disk_->contains(id)) {
    auto blob = disk_->get(id);
    if (blob) return std::move(blob).value();
  }
  return std::nullopt;
}

bool SessionTiers::contains(const std::string& id) const {
  return host_.count(id) > 0 || (disk_ && disk_->contains(id));
}

std::string SessionTiers::where(const std::string& id) const {
  if (host_.count(id) > 0) return "host";
  if (disk_ && disk_->contains(id)) return "disk";
  return "none";
}

void SessionTiers::erase(const std::string& id) {
  if (auto it = host_.find(id); it != host_.end()) {
    host_used_ -= it->second.first.size();
    host_lru_.erase(it->second.second);
    host_.erase(it);
  }
  if (disk_) (void)disk_->erase(id);
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
  return s;
}

}  // namespace tangram
