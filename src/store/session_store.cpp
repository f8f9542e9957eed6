#include "store/session_store.h"

#include <algorithm>

namespace tangram {

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

Session* SessionStore::find(const std::string& id) {
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : &it->second;
}

const Session* SessionStore::find(const std::string& id) const {
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : &it->second;
}

Session& SessionStore::get_or_create(const std::string& id, bool anonymous) {
  if (Session* s = find(id)) return *s;
  // Past the cap, forget the least recently used idle entries (their caches go with them).
  while (sessions_.size() >= max_sessions_) {
    auto victim = sessions_.end();
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it)
      if (!it->second.busy &&
          (victim == sessions_.end() || it->second.last_used < victim->second.last_used))
        victim = it;
    if (victim == sessions_.end()) break;
    if (victim->second.cache) ++evictions_;
    sessions_.erase(victim);
  }
  Session& s = sessions_[id];
  s.id = id;
  s.anonymous = anonymous;
  return s;
}

std::string SessionStore::new_anonymous_id() {
  for (;;) {
    std::string id = "anon-" + std::to_string(next_anonymous_++);
    if (!sessions_.contains(id)) return id;
  }
}

Session* SessionStore::match_prefix(const std::vector<int32_t>& prompt, int64_t min_prefix) {
  Session* best = nullptr;
  size_t best_len = 0;
  for (auto& [id, s] : sessions_) {
    if (s.busy || !s.cache || s.tokens.empty()) continue;
    const size_t n = common_prefix(s.tokens, prompt);
    if (static_cast<int64_t>(n) < min_prefix) continue;
    if (n < s.tokens.size() && !s.anonymous) continue;
    if (n > best_len) {
      best = &s;
      best_len = n;
    }
  }
  return best;
}

Session* SessionStore::lru_idle_resident() {
  Session* victim = nullptr;
  for (auto& [id, s] : sessions_)
    if (!s.busy && s.cache && (victim == nullptr || s.last_used < victim->last_used)) victim = &s;
  return victim;
}

std::vector<Session*> SessionStore::idle_resident_before(
    std::chrono::steady_clock::time_point cutoff) {
  std::vector<Session*> out;
  for (auto& [id, s] : sessions_)
    if (!s.busy && s.cache && s.idle_since < cutoff) out.push_back(&s);
  std::sort(out.begin(), out.end(),
            [](const Session* a, const Session* b) { return a->last_used < b->last_used; });
  return out;
}

int64_t SessionStore::evict_lru() {
  Session* victim = lru_idle_resident();
  if (victim == nullptr) return -1;
  const int64_t pages = victim->cache->pages_held();
  victim->cache.reset();
  ++evictions_;
  return pages;
}

int64_t SessionStore::evict_all_idle() {
  int64_t pages = 0;
  for (int64_t p; (p = evict_lru()) >= 0;) pages += p;
  return pages;
}

bool SessionStore::erase(const std::string& id) {
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.busy) return false;
  sessions_.erase(it);
  return true;
}

size_t SessionStore::resident() const {
  return static_cast<size_t>(std::count_if(sessions_.begin(), sessions_.end(), [](const auto& kv) {
    return kv.second.cache != nullptr;
  }));
}

}  // namespace tangram
