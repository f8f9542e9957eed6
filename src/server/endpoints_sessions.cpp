#include "server/http_server_impl.h"

namespace tangram::server {

void HttpServer::Impl::handle_sessions(const http::Request& req, http::Response& res) {
  const std::string owner = *owner_of(req);
  const std::vector<ConversationInfo> list = conversations.list(owner);
  std::vector<SessionTiers::Location> where(list.size());
  engine.run_on_worker([&](Scheduler& s) {
    for (size_t i = 0; i < list.size(); ++i)
      where[i] = s.session_location(Conversations::engine_key(owner, list[i].id));
  });
  ordered_json data = ordered_json::array();
  for (size_t i = 0; i < list.size(); ++i) {
    const ConversationInfo& c = list[i];
    ordered_json j;
    j["id"] = c.id;
    j["object"] = "session";
    // turns: null for a restored conversation (its count is unknown).
    j["turns"] = c.turns >= 0 ? ordered_json(c.turns) : ordered_json(nullptr);
    if (c.turns < 0) j["restored"] = true;
    j["tokens"] = c.tokens;
    j["created"] = c.created_unix;
    j["last_used"] = c.last_used_unix;
    // Where its KV is (running, resident, host, disk, redis, none: recomputed), and the pool
    // pages it holds or its serialised size in that tier.
    j["tier"] = where[i].tier;
    j["kv_bytes"] = where[i].bytes;
    data.push_back(std::move(j));
  }
  send_json(res, ordered_json{{"object", "list"}, {"data", data}});
}

void HttpServer::Impl::handle_delete_session(const http::Request& req, http::Response& res) {
  const std::string owner = *owner_of(req);
  const std::string id = req.params.at(0);
  if (!conversations.erase(owner, id))
    return send_error(
        res, ApiError{404, fmt::format("session '{}' is not available to this API key", id),
                      "invalid_request_error", "session_id", "session_not_found", 0});
  // The erase queued the engine's drop (a turn still running is cancelled, every page freed,
  // every tier's copy erased); the answer waits for it, so the delete is final once answered.
  engine.wait_tasks();
  send_json(res, ordered_json{{"id", id}, {"object", "session"}, {"deleted", true}});
}

}  // namespace tangram::server
