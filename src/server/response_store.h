// The responses a server keeps (store: true) for GET /v1/responses/{id} and for chaining turns
// with previous_response_id. Each key (owner) has its own least-recently-used list of at most
// max_per_owner responses, so one key's traffic never pushes out another's.
//
// A response holds its chain's messages as shared, immutable links (each turn's input and
// output, then the turn before), so a chain of N turns costs O(N) however many of its responses
// are stored, and a response evicted from the list still serves as history to those after it.
#pragma once

#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"

namespace tangram::server {

// One turn of a chain: the messages it added (input, then the assistant's reply), after `before`.
struct ChainLink {
  std::vector<ChatMessage> messages;
  std::shared_ptr<const ChainLink> before;
};

// The messages of a chain in order, oldest first.
std::vector<ChatMessage> chain_messages(const std::shared_ptr<const ChainLink>& last);

struct StoredResponse {
  nlohmann::ordered_json body;               // the response object as it was answered
  std::shared_ptr<const ChainLink> history;  // its chain up to and including its own output
};

class ResponseStore {
 public:
  explicit ResponseStore(size_t max_per_owner) : max_(max_per_owner) {}

  void put(const std::string& owner, const std::string& id, StoredResponse r);
  // The owner's response, or nullopt (also for another owner's id: nothing leaks).
  std::optional<StoredResponse> get(const std::string& owner, const std::string& id);
  bool erase(const std::string& owner, const std::string& id);
  size_t size(const std::string& owner) const;

 private:
  struct Owned {
    std::list<std::string> lru;  // front = least recently used
    std::map<std::string, std::pair<StoredResponse, std::list<std::string>::iterator>> by_id;
  };
  size_t max_;
  mutable std::mutex mu_;
  std::map<std::string, Owned> owners_;
};

}  // namespace tangram::server
