#include "evaluation/soak_load.h"

#include "common/json_parse.h"
#include "evaluation/http_client.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "evaluation/seeded_rng.h"
#include "evaluation/sse_stream.h"

namespace tangram {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// Plain words the story models of the project know: user turns are a few of them.
constexpr std::string_view kWords[] = {
    "once",  "upon", "a",    "time", "there", "was", "little", "girl", "named", "lily", "she",
    "liked", "to",   "play", "with", "her",   "dog", "in",     "the",  "park",  "one",  "day",
    "they",  "saw",  "big",  "red",  "ball",  "and", "happy",  "sun",  "tree",  "went"};

// Cumulative weights of the actions a step picks (StreamDeleted comes with DeleteMidTurn).
struct Weighted {
  SoakAction action;
  double weight;
};
constexpr Weighted kMix[] = {{SoakAction::ChatStream, 0.40},    {SoakAction::Chat, 0.22},
                             {SoakAction::Disconnect, 0.10},    {SoakAction::StreamDeleted, 0.08},
                             {SoakAction::DeleteSession, 0.06}, {SoakAction::TooLong, 0.07},
                             {SoakAction::Malformed, 0.07}};

constexpr double kBackoffS = 0.25;  // wait after a request found no server: it is restarting

struct Message {
  std::string role, content;
};

class SoakClient {
 public:
  SoakClient(const SoakClientOptions& opt, int client, Clock::time_point t0)
      : opt_(opt),
        client_(client),
        t0_(t0),
        rng_(opt.seed, static_cast<uint64_t>(client)),
        http_(opt.endpoint.origin),
        side_(opt.endpoint.origin) {
    for (httplib::Client* c : {&http_, &side_}) {
      set_client_timeouts(*c, opt.timeout_s);
      c->set_keep_alive(true);
      c->set_tcp_nodelay(true);
    }
    new_conversation();
  }

  // One step: an action drawn from kMix; returns its records.
  void step(const std::function<void(SoakRequest)>& record) {
    const SoakAction a = draw();
    if (a == SoakAction::DeleteSession) {
      record(delete_session(SoakAction::DeleteSession));
      new_conversation();
      return;
    }
    if (a == SoakAction::TooLong || a == SoakAction::Malformed) return record(must_fail(a));
    if (history_full()) {  // the next turn would not fit the context: start over (or leave it
                           // behind)
      if (rng_.uniform01() < 0.75) record(delete_session(SoakAction::DeleteSession));
      new_conversation();
    }
    chat_turn(a, record);
    if (turn_ >= opt_.turns) {
      if (rng_.uniform01() < 0.75) record(delete_session(SoakAction::DeleteSession));
      new_conversation();  // the rest stay behind until the end's clean-up
    }
  }

 private:
  double now_s() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }

  SoakAction draw() {
    double u = rng_.uniform01(), total = 0;
    for (const Weighted& w : kMix) total += w.weight;
    u *= total;
    for (const Weighted& w : kMix) {
      if (u < w.weight) return w.action;
      u -= w.weight;
    }
    return SoakAction::ChatStream;
  }

  void new_conversation() {
    session_ = fmt::format("{}-c{}-s{}", opt_.run_tag, client_, conversations_++);
    history_.clear();
    turn_ = 0;
  }

  std::string words(int lo, int hi) {
    std::string s;
    const int64_t n = rng_.uniform_int(lo, hi + 1);
    for (int64_t i = 0; i < n; ++i) {
      if (!s.empty()) s += ' ';
      s += kWords[rng_.uniform_int(0, static_cast<int64_t>(std::size(kWords)))];
    }
    return s;
  }

  // Bytes bound tokens from above (every token stands for at least one byte), so a history whose
  // bytes, template overhead and answer fit the context fits it in tokens too.
  bool history_full() const {
    int64_t bytes =
        64 + opt_.max_tokens + 48;  // the template's frame, the answer, the next user turn
    for (const Message& m : history_) bytes += 32 + static_cast<int64_t>(m.content.size());
    return opt_.context > 0 && bytes > opt_.context;
  }

  httplib::Headers headers(bool with_session) const {
    httplib::Headers h;
    if (!opt_.api_key.empty()) h.emplace("Authorization", "Bearer " + opt_.api_key);
    if (with_session) h.emplace("X-Session-Id", session_);
    return h;
  }

  SoakRequest begin(SoakAction a) const {
    SoakRequest r;
    r.action = a;
    r.start_s = now_s();
    r.server_epoch = opt_.server_epoch();
    return r;
  }
  void end(SoakRequest& r) const {
    r.end_s = now_s();
    r.around_restart = r.server_epoch % 2 == 1 || opt_.server_epoch() != r.server_epoch;
  }

  std::string chat_body(const std::string& user, bool stream) const {
    json msgs = json::array();
    for (const Message& m : history_) msgs.push_back({{"role", m.role}, {"content", m.content}});
    msgs.push_back({{"role", "user"}, {"content", user}});
    json body = {{"messages", msgs},
                 {"max_tokens", opt_.max_tokens},
                 {"temperature", 0},
                 {"stream", stream}};
    if (stream) body["stream_options"] = {{"include_usage", true}};
    return body.dump();
  }

  void chat_turn(SoakAction a, const std::function<void(SoakRequest)>& record);
  SoakRequest stream_turn(SoakAction a, const std::string& body, std::string& reply,
                          std::optional<SoakRequest>* deleted);
  SoakRequest plain_turn(const std::string& body, std::string& reply);
  SoakRequest delete_session(SoakAction a);
  SoakRequest must_fail(SoakAction a);

  const SoakClientOptions& opt_;
  const int client_;
  const Clock::time_point t0_;
  SeededRng rng_;
  httplib::Client http_;  // the conversation's connection
  httplib::Client side_;  // DELETEs while a turn streams on http_
  std::string session_;
  std::vector<Message> history_;
  int turn_ = 0;
  int conversations_ = 0;
};

// How a request that got no answer ends; the caller waits a little when the server is down.
void no_response(SoakRequest& r, const httplib::Result& res) {
  r.status = 0;
  r.error = fmt::format("no response: {}", httplib::to_string(res.error()));
}

void SoakClient::chat_turn(SoakAction a, const std::function<void(SoakRequest)>& record) {
  const std::string user = words(3, 12);
  const bool stream = a != SoakAction::Chat;
  const std::string body = chat_body(user, stream);
  std::string reply;
  std::optional<SoakRequest> deleted;
  SoakRequest r =
      stream ? stream_turn(a, body, reply, a == SoakAction::StreamDeleted ? &deleted : nullptr)
             : plain_turn(body, reply);
  const bool completed = r.status == 200 && r.error.empty() && a != SoakAction::Disconnect;
  record(std::move(r));
  if (a == SoakAction::StreamDeleted) {
    if (!deleted)
      deleted = delete_session(SoakAction::DeleteMidTurn);  // no text came: delete after it
    record(std::move(*deleted));
    new_conversation();
    return;
  }
  if (completed) {
    history_.push_back({"user", user});
    history_.push_back({"assistant", reply});
    ++turn_;
  }
}

SoakRequest SoakClient::stream_turn(SoakAction a, const std::string& body, std::string& reply,
                                    std::optional<SoakRequest>* deleted) {
  SoakRequest r = begin(a);
  CompletionStreamReader reader;
  std::string error_body;
  bool cut = false;  // this client closed the stream on purpose
  httplib::Request req;
  req.method = "POST";
  req.path = opt_.endpoint.base_path + "/v1/chat/completions";
  req.headers = headers(true);
  req.headers.emplace("Content-Type", "application/json");
  req.headers.emplace("Accept", "text/event-stream");
  req.body = body;
  req.response_handler = [&](const httplib::Response& res) {
    r.status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (r.status != 200) {
      error_body.append(data, std::min<size_t>(n, 4096));
      return true;
    }
    if (reader.feed(std::string_view(data, n)) == 0) return true;
    if (a == SoakAction::Disconnect) return !(cut = true);  // walk away after the first text
    if (deleted && !*deleted) *deleted = delete_session(SoakAction::DeleteMidTurn);
    return true;
  };
  const httplib::Result res = http_.send(req);
  end(r);
  if (r.status == 0) {
    no_response(r, res);
    return r;
  }
  r.completion_tokens = reader.completion_tokens();
  if (r.status != 200) {
    r.error = fmt::format("HTTP {}: {}", r.status, error_body.substr(0, 200));
  } else if (cut) {
    http_.stop();  // the next request opens a fresh connection
  } else if (!res || !reader.error().empty() || !reader.done()) {
    r.stream_broken = true;
    r.error = !reader.error().empty() ? reader.error()
              : !res ? fmt::format("the stream broke: {}", httplib::to_string(res.error()))
                     : "the stream ended before [DONE]";
  }
  reply = reader.text();
  return r;
}

SoakRequest SoakClient::plain_turn(const std::string& body, std::string& reply) {
  SoakRequest r = begin(SoakAction::Chat);
  httplib::Headers h = headers(true);
  const httplib::Result res =
      http_.Post(opt_.endpoint.base_path + "/v1/chat/completions", h, body, "application/json");
  end(r);
  if (!res) {
    no_response(r, res);
    return r;
  }
  r.status = res->status;
  const json j = parse_json_or_discarded(res->body);
  if (r.status != 200) {
    r.error = fmt::format("HTTP {}: {}", r.status, res->body.substr(0, 200));
  } else if (!j.is_object() || !j.contains("choices") || j["choices"].empty() ||
             !j["choices"][0].contains("message")) {
    r.error = "a 200 answer that is not a chat completion: " + res->body.substr(0, 200);
  } else {
    reply = j["choices"][0]["message"].value("content", "");
    if (j.contains("usage") && j["usage"].is_object())
      r.completion_tokens = j["usage"].value("completion_tokens", 0);
  }
  return r;
}

SoakRequest SoakClient::delete_session(SoakAction a) {
  SoakRequest r = begin(a);
  httplib::Client& c = a == SoakAction::DeleteMidTurn ? side_ : http_;
  const httplib::Result res =
      c.Delete(opt_.endpoint.base_path + "/v1/sessions/" + session_, headers(false));
  end(r);
  if (!res) {
    no_response(r, res);
    return r;
  }
  r.status = res->status;
  // 404: the server never kept it (its first turn failed) or a restart lost it before the disk
  // wrote it.
  if (r.status != 200 && r.status != 404)
    r.error = fmt::format("HTTP {}: {}", r.status, res->body.substr(0, 200));
  return r;
}

SoakRequest SoakClient::must_fail(SoakAction a) {
  std::string body;
  if (a == SoakAction::TooLong) {
    // More words than the context has tokens: at least one token each.
    const int64_t n = std::max<int64_t>(opt_.context, 64) + 16;
    std::string text;
    for (int64_t i = 0; i < n; ++i)
      text += kWords[static_cast<size_t>(i) % std::size(kWords)], text += ' ';
    body = json{{"messages", {{{"role", "user"}, {"content", text}}}}, {"max_tokens", 4}}.dump();
  } else {
    body = "{\"messages\": [{\"role\": \"user\", \"content\": \"unfinished";  // not JSON
  }
  SoakRequest r = begin(a);
  const httplib::Result res = http_.Post(opt_.endpoint.base_path + "/v1/chat/completions",
                                         headers(false), body, "application/json");
  end(r);
  if (!res) {
    no_response(r, res);
    return r;
  }
  r.status = res->status;
  if (r.status < 400 || r.status >= 500) {
    r.expected = false;
    r.error =
        fmt::format("a request that must fail got HTTP {}: {}", r.status, res->body.substr(0, 200));
  }
  return r;
}

}  // namespace

std::string_view soak_action_name(SoakAction a) {
  switch (a) {
    case SoakAction::ChatStream:
      return "chat_stream";
    case SoakAction::Chat:
      return "chat";
    case SoakAction::Disconnect:
      return "disconnect_mid_stream";
    case SoakAction::StreamDeleted:
      return "stream_deleted_mid_turn";
    case SoakAction::DeleteMidTurn:
      return "delete_mid_turn";
    case SoakAction::DeleteSession:
      return "delete_session";
    case SoakAction::TooLong:
      return "too_long_prompt";
    case SoakAction::Malformed:
      return "malformed_body";
  }
  return "?";
}

void run_soak_client(const SoakClientOptions& opt, int client, Clock::time_point t0,
                     const std::atomic<bool>& stop,
                     const std::function<void(SoakRequest)>& record) {
  SoakClient c(opt, client, t0);
  auto rec = [&](SoakRequest r) {
    const bool no_server = r.status == 0;
    record(std::move(r));
    if (no_server && !stop.load())
      std::this_thread::sleep_for(std::chrono::duration<double>(kBackoffS));
  };
  while (!stop.load()) c.step(rec);
}

std::map<std::string, double> parse_prometheus_text(std::string_view text) {
  std::map<std::string, double> out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty() || line.front() == '#') continue;
    // The value follows the last space outside the labels ("name{a=\"x y\"} 3").
    const size_t close = line.rfind('}');
    const size_t sp = line.find(' ', close == std::string_view::npos ? 0 : close);
    if (sp == std::string_view::npos) continue;
    std::string_view v = line.substr(sp + 1);
    if (const size_t ts = v.find(' '); ts != std::string_view::npos)
      v = v.substr(0, ts);  // a timestamp
    double value = 0;
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
    if (ec != std::errc() || p != v.data() + v.size()) continue;
    out[std::string(line.substr(0, sp))] = value;
  }
  return out;
}

Result<std::map<std::string, double>> fetch_metrics(const HttpEndpoint& endpoint,
                                                    const std::string& api_key, double timeout_s) {
  httplib::Client http(endpoint.origin);
  set_client_timeouts(http, timeout_s);
  httplib::Headers h;
  if (!api_key.empty()) h.emplace("Authorization", "Bearer " + api_key);
  auto r = http.Get(endpoint.base_path + "/metrics", h);
  if (!r) return make_error("GET /metrics: {}", httplib::to_string(r.error()));
  if (r->status != 200) return make_error("GET /metrics: HTTP {}", r->status);
  return parse_prometheus_text(r->body);
}

Result<int64_t> fetch_context_length(const HttpEndpoint& endpoint, const std::string& api_key,
                                     double timeout_s) {
  httplib::Client http(endpoint.origin);
  set_client_timeouts(http, timeout_s);
  httplib::Headers h;
  if (!api_key.empty()) h.emplace("Authorization", "Bearer " + api_key);
  auto r = http.Get(endpoint.base_path + "/v1/models", h);
  if (!r) return make_error("GET /v1/models: {}", httplib::to_string(r.error()));
  if (r->status != 200) return make_error("GET /v1/models: HTTP {}", r->status);
  const json j = parse_json_or_discarded(r->body);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
      !j["data"][0].contains("context_length") ||
      !j["data"][0]["context_length"].is_number_integer())
    return make_error("GET /v1/models names no context_length: {}", r->body.substr(0, 200));
  return j["data"][0]["context_length"].get<int64_t>();
}

}  // namespace tangram
