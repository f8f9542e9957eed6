#include "evaluation/http_load.h"

#include "common/json_parse.h"
#include "evaluation/http_client.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "evaluation/sse_stream.h"

namespace tangram {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr size_t kMaxErrorBody = 4096;  // bytes of a non-200 body kept for the error message

bool session_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == ':' || c == '-';
}

httplib::Headers base_headers(const std::string& api_key) {
  httplib::Headers h;
  if (!api_key.empty()) h.emplace("Authorization", "Bearer " + api_key);
  return h;
}

// The message of an OpenAI error body, else the body's start.
std::string error_message(int status, const std::string& body) {
  const json j = parse_json_or_discarded(body);
  if (j.is_object())
    if (auto e = j.find("error"); e != j.end() && e->is_object())
      if (auto m = e->find("message"); m != e->end() && m->is_string())
        return fmt::format("HTTP {}: {}", status, m->get<std::string>());
  return fmt::format("HTTP {}: {}", status, body.substr(0, 200));
}

// One conversation's client: its own connection, its turns in order.
class ConversationClient {
 public:
  ConversationClient(const HttpLoadOptions& opt, Clock::time_point t0)
      : opt_(opt), t0_(t0), http_(opt.endpoint.origin) {
    set_client_timeouts(http_, opt.timeout_s);
    http_.set_keep_alive(true);
    // Without it a request on a kept-alive connection (headers and body are separate writes)
    // waits for the server's delayed ACK (tens of ms), which would be measured as TTFT.
    http_.set_tcp_nodelay(true);
  }

  int64_t rejections = 0;  // 429 answers this client got
  bool gave_up = false;    // a turn was still rejected after the retries

  // Runs the turns; hands each finished turn to `done` (a record) and then the count of turns
  // skipped after a failure to `skipped`.
  template <typename Done, typename Skipped>
  void run(const Conversation& c, Done&& done, Skipped&& skipped) {
    std::vector<int32_t> history;  // [tokens] the conversation so far, as the next prompt starts
    for (size_t t = 0; t < c.turns.size(); ++t) {
      const Turn& turn = c.turns[t];
      if (t > 0 && turn.think_time_s > 0)
        std::this_thread::sleep_for(std::chrono::duration<double>(turn.think_time_s));
      std::vector<int32_t> prompt = history;
      prompt.insert(prompt.end(), turn.user_tokens.begin(), turn.user_tokens.end());
      HttpRequestRecord r = send_turn(c.id, static_cast<int>(t), prompt, turn.output_tokens);
      const bool ok = r.error.empty();
      std::string reply = std::move(reply_);
      done(std::move(r));
      if (!ok) {
        skipped(static_cast<int64_t>(c.turns.size() - t - 1));
        return;
      }
      history = std::move(prompt);
      const std::vector<int32_t> answer = opt_.encode_reply(reply);
      history.insert(history.end(), answer.begin(), answer.end());
    }
  }

 private:
  double now_s() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }

  HttpRequestRecord send_turn(const std::string& conversation, int turn,
                              const std::vector<int32_t>& prompt, int64_t max_tokens) {
    HttpRequestRecord out;
    out.record.session = conversation;
    out.record.turn = turn;
    out.session_id = turn_session_id(opt_.run_tag, conversation, turn, opt_.reuse);
    json body = {{"prompt", prompt},
                 {"max_tokens", max_tokens},
                 {"temperature", 0},
                 {"stream", true},
                 {"stream_options", {{"include_usage", true}}}};
    if (!opt_.model.empty()) body["model"] = opt_.model;
    const std::string payload = body.dump();

    out.record.submit_s = now_s();
    for (;;) {
      const double attempt_s = now_s();
      CompletionStreamReader reader;
      int status = 0;
      std::string retry_after, error_body;
      double first_token_s = -1;
      httplib::Request req;
      req.method = "POST";
      req.path = opt_.endpoint.base_path + "/v1/completions";
      req.headers = base_headers(opt_.api_key);
      req.headers.emplace("Content-Type", "application/json");
      req.headers.emplace("Accept", "text/event-stream");
      req.headers.emplace("X-Session-Id", out.session_id);
      req.body = payload;
      req.response_handler = [&](const httplib::Response& res) {
        status = res.status;
        retry_after = res.get_header_value("Retry-After");
        return true;
      };
      req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
        if (status != 200) {
          error_body.append(
              data, std::min(n, kMaxErrorBody - std::min(kMaxErrorBody, error_body.size())));
          return true;
        }
        if (reader.feed(std::string_view(data, n)) > 0 && first_token_s < 0)
          first_token_s = now_s();
        return true;
      };
      const httplib::Result res = http_.send(req);
      const double end_s = now_s();
      out.http_status = status;
      if (!res && status == 0) {
        out.error = fmt::format("no response: {}", httplib::to_string(res.error()));
        out.record.error = true;
        out.record.finish_s = out.record.first_token_s = std::max(end_s, out.record.submit_s);
        return out;
      }
      if (status == 429) {
        ++rejections;
        if (out.rejections >= opt_.max_429_retries) {
          out.error = fmt::format("still rejected after {} retries: {}", out.rejections,
                                  error_message(status, error_body));
          out.record.error = true;
          out.record.finish_s = out.record.first_token_s = end_s;
          gave_up = true;
          return out;
        }
        ++out.rejections;
        const double wait = retry_wait_s(retry_after, opt_.fallback_retry_s, opt_.max_retry_wait_s);
        std::this_thread::sleep_for(std::chrono::duration<double>(wait));
        continue;
      }
      out.record.queue_s = attempt_s - out.record.submit_s;  // time lost to 429s
      out.record.finish_s = end_s;
      if (status != 200) {
        out.error = error_message(status, error_body);
      } else if (!res) {
        out.error = fmt::format("the stream broke: {}", httplib::to_string(res.error()));
      } else if (!reader.error().empty()) {
        out.error = reader.error();
      } else if (!reader.done()) {
        out.error = "the stream ended before [DONE]";
      } else if (!reader.has_usage()) {
        out.error = "the stream carried no usage chunk (stream_options.include_usage)";
      }
      out.finish_reason = reader.finish_reason();
      out.record.prompt_tokens = reader.prompt_tokens();
      out.record.cached_tokens = std::min(reader.cached_tokens(), reader.prompt_tokens());
      out.record.output_tokens = reader.completion_tokens();
      out.record.first_token_s = first_token_s >= 0 ? first_token_s : end_s;
      out.record.error = !out.error.empty();
      reply_ = reader.text();
      return out;
    }
  }

  const HttpLoadOptions& opt_;
  Clock::time_point t0_;
  httplib::Client http_;
  std::string reply_;  // the last completed turn's text
};

}  // namespace

Result<HttpEndpoint> parse_base_url(std::string_view url) {
  std::string_view rest = url;
  std::string scheme;
  if (rest.rfind("http://", 0) == 0) {
    scheme = "http";
    rest.remove_prefix(7);
  } else if (rest.rfind("https://", 0) == 0) {
    scheme = "https";
    rest.remove_prefix(8);
  } else {
    return make_error("the URL '{}' must start with http:// or https://", url);
  }
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string path(slash == std::string_view::npos ? std::string_view() : rest.substr(slash));
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (path.find_first_of("?#") != std::string::npos)
    return make_error("the URL '{}' must not carry a query or fragment", url);
  std::string_view host = authority;
  std::string port_text;
  if (!authority.empty() && authority.front() == '[') {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos)
      return make_error("the URL '{}' has an unclosed '[' in its host", url);
    host = authority.substr(0, close + 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return make_error("the URL '{}' has text after its host", url);
      port_text = after.substr(1);
    }
  } else if (const size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port_text = authority.substr(colon + 1);
  }
  if (host.empty() || host == "[]") return make_error("the URL '{}' names no host", url);
  if (host.find('@') != std::string_view::npos)
    return make_error("the URL '{}' must not carry credentials (use --api-key)", url);
  int port = scheme == "https" ? 443 : 80;
  if (!port_text.empty() || authority.back() == ':') {
    const auto [p, ec] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || p != port_text.data() + port_text.size() || port < 1 || port > 65535)
      return make_error("the URL '{}' has an invalid port '{}' (1 to 65535)", url, port_text);
  }
  HttpEndpoint e;
  e.origin = fmt::format("{}://{}:{}", scheme, host, port);
  e.base_path = std::move(path);
  return e;
}

std::string_view session_reuse_name(SessionReuse reuse) {
  return reuse == SessionReuse::On ? "on" : "off";
}

std::string turn_session_id(std::string_view run_tag, std::string_view conversation_id, int turn,
                            SessionReuse reuse) {
  std::string id = fmt::format("{}-{}", run_tag, conversation_id);
  if (reuse == SessionReuse::Off) id += fmt::format("-t{}", turn);
  for (char& c : id)
    if (!session_char(c)) c = '_';
  if (id.size() > 128) id.erase(0, id.size() - 128);
  return id;
}

std::vector<int32_t> encode_continuation(const Tokenizer& tok, std::string_view text) {
  if (tok.vocab().add_space_prefix && !text.empty() && text.front() == ' ') text.remove_prefix(1);
  if (text.empty()) return {};
  return tok.encode(text, /*add_special=*/false, /*parse_special=*/false);
}

double retry_wait_s(std::string_view retry_after, double fallback_s, double max_wait_s) {
  double wait = fallback_s;
  while (!retry_after.empty() && retry_after.front() == ' ') retry_after.remove_prefix(1);
  while (!retry_after.empty() && retry_after.back() == ' ') retry_after.remove_suffix(1);
  double v = 0;
  const auto [p, ec] =
      std::from_chars(retry_after.data(), retry_after.data() + retry_after.size(), v);
  if (!retry_after.empty() && ec == std::errc() && p == retry_after.data() + retry_after.size() &&
      std::isfinite(v) && v >= 0)
    wait = v;
  return std::clamp(wait, 0.0, std::max(0.0, max_wait_s));
}

Result<HttpLoadRun> run_http_load(const HttpLoadOptions& opt,
                                  const std::vector<Conversation>& conversations,
                                  const std::function<void(int64_t, int64_t)>& on_progress) {
  if (!opt.encode_reply) return make_error("http load: encode_reply is required");
  if (opt.concurrency < 0)
    return make_error("http load: concurrency must be >= 0, got {}", opt.concurrency);
  if (opt.max_429_retries < 0) return make_error("http load: max_429_retries must be >= 0");
  if (!(opt.timeout_s > 0 && opt.timeout_s <= 86400))
    return make_error("http load: timeout_s must be in (0, 86400]");
  if (!(opt.max_retry_wait_s >= 0) || !(opt.fallback_retry_s >= 0))
    return make_error("http load: retry waits must be >= 0");
  if (opt.endpoint.origin.empty()) return make_error("http load: no endpoint (parse_base_url)");
  HttpLoadRun run;
  for (const Conversation& c : conversations) {
    for (const Turn& t : c.turns)
      if (t.user_tokens.empty())
        return make_error("http load: a turn of {} has no user tokens (tokenise text turns first)",
                          c.id);
    run.planned += static_cast<int64_t>(c.turns.size());
  }

  std::mutex mu;  // guards run and the progress count
  int64_t done = 0;
  const auto t0 = Clock::now();
  auto record = [&](HttpRequestRecord r) {
    std::lock_guard lock(mu);
    run.requests.push_back(std::move(r));
    ++done;
    if (on_progress) on_progress(done, run.planned);
  };
  auto skip = [&](int64_t n) {
    if (n <= 0) return;
    std::lock_guard lock(mu);
    run.skipped += n;
    done += n;
    if (on_progress) on_progress(done, run.planned);
  };
  auto serve_one = [&](const Conversation& c) {
    ConversationClient client(opt, t0);
    client.run(c, record, skip);
    std::lock_guard lock(mu);
    run.rejected_429 += client.rejections;
    if (client.gave_up) ++run.gave_up_429;
  };

  std::vector<std::thread> threads;
  if (opt.concurrency > 0) {
    std::atomic<size_t> next{0};
    const size_t n = std::min(conversations.size(), static_cast<size_t>(opt.concurrency));
    for (size_t w = 0; w < n; ++w)
      threads.emplace_back([&] {
        for (size_t i = next++; i < conversations.size(); i = next++) serve_one(conversations[i]);
      });
    for (auto& t : threads) t.join();
  } else {
    for (const Conversation& c : conversations)
      threads.emplace_back([&, conversation = &c] {
        std::this_thread::sleep_until(
            t0 + std::chrono::duration_cast<Clock::duration>(
                     std::chrono::duration<double>(std::max(0.0, conversation->arrival_s))));
        serve_one(*conversation);
      });
    for (auto& t : threads) t.join();
  }
  run.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  for (const auto& r : run.requests) run.wall_s = std::max(run.wall_s, r.record.finish_s);
  return run;
}

std::vector<RequestRecord> request_records(const HttpLoadRun& run) {
  std::vector<RequestRecord> out;
  out.reserve(run.requests.size());
  for (const auto& r : run.requests) out.push_back(r.record);
  return out;
}

Result<int64_t> delete_all_sessions(const HttpEndpoint& endpoint, const std::string& api_key,
                                    double timeout_s) {
  httplib::Client http(endpoint.origin);
  set_client_timeouts(http, timeout_s);
  const httplib::Headers headers = base_headers(api_key);
  auto listed = http.Get(endpoint.base_path + "/v1/sessions", headers);
  if (!listed) return make_error("GET /v1/sessions: {}", httplib::to_string(listed.error()));
  if (listed->status == 404)
    return int64_t{0};  // a server without Tangram's session API keeps nothing to delete
  if (listed->status != 200)
    return make_error("GET /v1/sessions: {}", error_message(listed->status, listed->body));
  const json j = parse_json_or_discarded(listed->body);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array())
    return make_error("GET /v1/sessions: not a list of sessions: {}", listed->body.substr(0, 200));
  int64_t deleted = 0;
  for (const json& s : j["data"]) {
    if (!s.is_object() || !s.contains("id") || !s["id"].is_string()) continue;
    const std::string id = s["id"].get<std::string>();
    auto r = http.Delete(endpoint.base_path + "/v1/sessions/" + id, headers);
    if (!r) return make_error("DELETE /v1/sessions/{}: {}", id, httplib::to_string(r.error()));
    if (r->status != 200 && r->status != 404)  // 404: gone meanwhile
      return make_error("DELETE /v1/sessions/{}: {}", id, error_message(r->status, r->body));
    if (r->status == 200) ++deleted;
  }
  return deleted;
}

}  // namespace tangram
