#include "server/response_store.h"

#include <algorithm>

namespace tangram::server {

std::vector<ChatMessage> chain_messages(const std::shared_ptr<const ChainLink>& last) {
  std::vector<const ChainLink*> links;
  for (const ChainLink* l = last.get(); l != nullptr; l = l->before.get()) links.push_back(l);
  std::vector<ChatMessage> out;
  for (auto it = links.rbegin(); it != links.rend(); ++it)
    out.insert(out.end(), (*it)->messages.begin(), (*it)->messages.end());
  return out;
}

void ResponseStore::put(const std::string& owner, const std::string& id, StoredResponse r) {
  std::lock_guard lock(mu_);
  Owned& o = owners_[owner];
  if (auto it = o.by_id.find(id); it != o.by_id.end()) {
    o.lru.erase(it->second.second);
    o.by_id.erase(it);
  }
  auto pos = o.lru.insert(o.lru.end(), id);
  o.by_id.emplace(id, std::make_pair(std::move(r), pos));
  while (o.by_id.size() > std::max<size_t>(max_, 1)) {
    o.by_id.erase(o.lru.front());
    o.lru.pop_front();
  }
}

std::optional<StoredResponse> ResponseStore::get(const std::string& owner, const std::string& id) {
  std::lock_guard lock(mu_);
  auto o = owners_.find(owner);
  if (o == owners_.end()) return std::nullopt;
  auto it = o->second.by_id.find(id);
  if (it == o->second.by_id.end()) return std::nullopt;
  o->second.lru.splice(o->second.lru.end(), o->second.lru, it->second.second);
  return it->second.first;
}

bool ResponseStore::erase(const std::string& owner, const std::string& id) {
  std::lock_guard lock(mu_);
  auto o = owners_.find(owner);
  if (o == owners_.end()) return false;
  auto it = o->second.by_id.find(id);
  if (it == o->second.by_id.end()) return false;
  o->second.lru.erase(it->second.second);
  o->second.by_id.erase(it);
  return true;
}

size_t ResponseStore::size(const std::string& owner) const {
  std::lock_guard lock(mu_);
  auto o = owners_.find(owner);
  return o == owners_.end() ? 0 : o->second.by_id.size();
}

}  // namespace tangram::server
