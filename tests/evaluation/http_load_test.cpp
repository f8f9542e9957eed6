// The HTTP load generator against a scripted fake server (cpp-httplib in this process): what it
// sends (history, session ids, headers), how it reads streams cut into small pieces, 429 retries,
// failures, closed- and open-loop scheduling; plus its pure helpers. The real server end to end
// is tested through `tangram bench-serve --quick` (tests/cli).
#include <gtest/gtest.h>

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "evaluation/http_load.h"
#include "gguf/gguf_file.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace tangram {
namespace {

using nlohmann::json;

// Replies are ASCII; a reply's "tokens" are its characters' codes.
std::vector<int32_t> char_codes(const std::string& s) {
  std::vector<int32_t> v;
  for (char c : s) v.push_back(static_cast<unsigned char>(c));
  return v;
}

struct Seen {
  std::vector<int32_t> prompt;
  std::string session_id;
  std::string authorization;
};

// A fake /v1/completions: streams " r<prompt length>" in 3-byte writes, with usage whose cached
// tokens are the previous prompt of the same X-Session-Id. `script(call, req, res)` may answer
// instead (return true when it did).
class FakeServer {
 public:
  using Script = std::function<bool(int call, const httplib::Request&, httplib::Response&)>;

  explicit FakeServer(Script script = {}) : script_(std::move(script)) {
    http_.Post("/v1/completions",
               [this](const httplib::Request& req, httplib::Response& res) { complete(req, res); });
    http_.Get("/v1/sessions", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu_);
      authorizations_.push_back(req.get_header_value("Authorization"));
      json data = json::array();
      for (const auto& [id, n] : last_prompt_) data.push_back({{"id", id}});
      res.set_content(json{{"object", "list"}, {"data", data}}.dump(), "application/json");
    });
    http_.Delete(R"(/v1/sessions/(.+))",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   std::lock_guard lock(mu_);
                   deleted_.push_back(req.matches[1]);
                   res.set_content("{\"deleted\":true}", "application/json");
                 });
    port_ = http_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { http_.listen_after_bind(); });
  }
  ~FakeServer() {
    http_.stop();
    thread_.join();
  }

  HttpEndpoint endpoint() const {
    return HttpEndpoint{"http://127.0.0.1:" + std::to_string(port_), ""};
  }
  std::vector<Seen> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }
  int max_in_flight() const { return max_in_flight_.load(); }
  std::vector<std::string> deleted() {
    std::lock_guard lock(mu_);
    return deleted_;
  }
  std::vector<std::string> authorizations() {
    std::lock_guard lock(mu_);
    return authorizations_;
  }
  void add_session(const std::string& id) {
    std::lock_guard lock(mu_);
    last_prompt_[id] = 0;
  }
  std::chrono::milliseconds stream_delay{0};

 private:
  void complete(const httplib::Request& req, httplib::Response& res) {
    const int now = ++in_flight_;
    for (int m = max_in_flight_.load(); now > m && !max_in_flight_.compare_exchange_weak(m, now);) {
    }
    int call = 0;
    Seen s;
    s.session_id = req.get_header_value("X-Session-Id");
    s.authorization = req.get_header_value("Authorization");
    const json body = json::parse(req.body, nullptr, false);
    if (body.is_object() && body.contains("prompt") && body["prompt"].is_array())
      s.prompt = body["prompt"].get<std::vector<int32_t>>();
    int64_t cached = 0;
    {
      std::lock_guard lock(mu_);
      call = calls_++;
      seen_.push_back(s);
    }
    if (script_ && script_(call, req, res)) {
      --in_flight_;
      return;
    }
    {
      std::lock_guard lock(mu_);
      cached = last_prompt_.count(s.session_id) ? last_prompt_[s.session_id] : 0;
      last_prompt_[s.session_id] = static_cast<int64_t>(s.prompt.size());
    }
    const std::string text = " r" + std::to_string(s.prompt.size());
    const json piece = {{"object", "text_completion"},
                        {"choices", {{{"text", text}, {"finish_reason", nullptr}}}}};
    const json last = {{"object", "text_completion"},
                       {"choices", {{{"text", ""}, {"finish_reason", "length"}}}}};
    const json usage = {{"object", "text_completion"},
                        {"choices", json::array()},
                        {"usage",
                         {{"prompt_tokens", s.prompt.size()},
                          {"completion_tokens", 2},
                          {"total_tokens", s.prompt.size() + 2},
                          {"prompt_tokens_details", {{"cached_tokens", cached}}}}}};
    const std::string stream = ": keep-alive\n\ndata: " + piece.dump() +
                               "\n\ndata: " + last.dump() + "\n\ndata: " + usage.dump() +
                               "\n\ndata: [DONE]\n\n";
    const auto delay = stream_delay;
    res.set_chunked_content_provider(
        "text/event-stream", [this, stream, delay](size_t, httplib::DataSink& sink) {
          std::this_thread::sleep_for(delay);
          for (size_t i = 0; i < stream.size(); i += 3)
            if (!sink.write(stream.data() + i, std::min<size_t>(3, stream.size() - i))) break;
          sink.done();
          --in_flight_;
          return true;
        });
  }

  Script script_;
  httplib::Server http_;
  int port_ = -1;
  std::thread thread_;
  std::mutex mu_;
  int calls_ = 0;
  std::vector<Seen> seen_;
  std::map<std::string, int64_t> last_prompt_;
  std::vector<std::string> deleted_, authorizations_;
  std::atomic<int> in_flight_{0}, max_in_flight_{0};
};

Conversation conversation(const std::string& id, std::vector<std::vector<int32_t>> users,
                          double arrival_s = 0) {
  Conversation c;
  c.id = id;
  c.arrival_s = arrival_s;
  for (auto& u : users) {
    Turn t;
    t.user_tokens = std::move(u);
    t.output_tokens = 4;
    c.turns.push_back(std::move(t));
  }
  return c;
}

HttpLoadOptions options_for(const FakeServer& s, SessionReuse reuse) {
  HttpLoadOptions o;
  o.endpoint = s.endpoint();
  o.reuse = reuse;
  o.run_tag = "t";
  o.encode_reply = char_codes;
  o.fallback_retry_s = 0;
  o.timeout_s = 20;
  return o;
}

TEST(HttpLoad, HistoryIsEveryPromptPlusEachReplyAndReuseKeepsOneSessionId) {
  for (SessionReuse reuse : {SessionReuse::On, SessionReuse::Off}) {
    FakeServer server;
    HttpLoadOptions o = options_for(server, reuse);
    o.api_key = "sk-test";
    const std::vector<Conversation> cs = {conversation("c0", {{10, 11, 12}, {20, 21}, {30}})};
    auto run = run_http_load(o, cs);
    ASSERT_TRUE(run.ok()) << run.message();
    ASSERT_EQ(run->requests.size(), 3u);
    EXPECT_EQ(run->planned, 3);
    EXPECT_EQ(run->skipped, 0);
    const auto seen = server.seen();
    ASSERT_EQ(seen.size(), 3u);
    // turn 0: the user tokens; turn 1: + " r3" + user; turn 2: + " r8" + user.
    std::vector<int32_t> expect = {10, 11, 12};
    EXPECT_EQ(seen[0].prompt, expect);
    for (int32_t c : char_codes(" r3")) expect.push_back(c);
    expect.insert(expect.end(), {20, 21});
    EXPECT_EQ(seen[1].prompt, expect);
    for (int32_t c : char_codes(" r8")) expect.push_back(c);
    expect.push_back(30);
    EXPECT_EQ(seen[2].prompt, expect);
    for (const Seen& s : seen) EXPECT_EQ(s.authorization, "Bearer sk-test");
    std::set<std::string> ids;
    for (const Seen& s : seen) ids.insert(s.session_id);
    EXPECT_EQ(ids.size(), reuse == SessionReuse::On ? 1u : 3u);
    for (const auto& r : run->requests) {
      EXPECT_TRUE(r.error.empty()) << r.error;
      EXPECT_EQ(r.http_status, 200);
      EXPECT_EQ(r.finish_reason, "length");
      EXPECT_EQ(r.record.output_tokens, 2);
      EXPECT_EQ(r.record.prompt_tokens,
                static_cast<int64_t>(seen[static_cast<size_t>(r.record.turn)].prompt.size()));
      EXPECT_LE(r.record.submit_s, r.record.first_token_s);
      EXPECT_LE(r.record.first_token_s, r.record.finish_s);
      // The fake server's cache: the previous prompt of the same session id.
      const int64_t expect_cached =
          reuse == SessionReuse::Off || r.record.turn == 0
              ? 0
              : static_cast<int64_t>(seen[static_cast<size_t>(r.record.turn - 1)].prompt.size());
      EXPECT_EQ(r.record.cached_tokens, expect_cached) << r.record.turn;
    }
    auto metrics = compute_run_metrics(request_records(*run), run->wall_s);
    ASSERT_TRUE(metrics.ok()) << metrics.message();
    EXPECT_EQ(metrics->completed, 3u);
  }
}

TEST(HttpLoad, A429IsRetriedAfterItsRetryAfter) {
  FakeServer server([](int call, const httplib::Request&, httplib::Response& res) {
    if (call != 0) return false;
    res.status = 429;
    res.set_header("Retry-After", "0");
    res.set_content(R"({"error":{"message":"at capacity","type":"rate_limit_error"}})",
                    "application/json");
    return true;
  });
  auto run = run_http_load(options_for(server, SessionReuse::On), {conversation("c", {{5, 6}})});
  ASSERT_TRUE(run.ok()) << run.message();
  ASSERT_EQ(run->requests.size(), 1u);
  const auto& r = run->requests[0];
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.rejections, 1);
  EXPECT_EQ(run->rejected_429, 1);
  EXPECT_EQ(run->gave_up_429, 0);
  EXPECT_GE(r.record.queue_s, 0.0);
  EXPECT_EQ(server.seen().size(), 2u);
}

TEST(HttpLoad, PersistentRejectionGivesUpAndSkipsTheRest) {
  FakeServer server([](int, const httplib::Request&, httplib::Response& res) {
    res.status = 429;
    res.set_header("Retry-After", "0");
    res.set_content(R"({"error":{"message":"at capacity"}})", "application/json");
    return true;
  });
  HttpLoadOptions o = options_for(server, SessionReuse::On);
  o.max_429_retries = 2;
  auto run = run_http_load(o, {conversation("c", {{1}, {2}, {3}})});
  ASSERT_TRUE(run.ok()) << run.message();
  ASSERT_EQ(run->requests.size(), 1u);
  EXPECT_NE(run->requests[0].error.find("at capacity"), std::string::npos)
      << run->requests[0].error;
  EXPECT_EQ(run->requests[0].http_status, 429);
  EXPECT_EQ(run->rejected_429, 3);  // the first try and two retries
  EXPECT_EQ(run->gave_up_429, 1);
  EXPECT_EQ(run->skipped, 2);
  EXPECT_EQ(static_cast<int64_t>(run->requests.size()) + run->skipped, run->planned);
}

TEST(HttpLoad, FailuresEndTheConversationAndAreCounted) {
  // A 500 on the second turn; a stream cut before [DONE] in the other conversation.
  FakeServer server([](int, const httplib::Request& req, httplib::Response& res) {
    const json b = json::parse(req.body);
    const auto n = b["prompt"].size();
    if (n > 1 && b["prompt"][0] == 7) {  // conversation "a", turn 1
      res.status = 500;
      res.set_content(R"({"error":{"message":"boom"}})", "application/json");
      return true;
    }
    if (b["prompt"][0] == 9) {  // conversation "b": one chunk, then the stream ends
      res.set_chunked_content_provider("text/event-stream", [](size_t, httplib::DataSink& sink) {
        const std::string s = "data: {\"choices\":[{\"text\":\"x\"}]}\n\n";
        sink.write(s.data(), s.size());
        sink.done();
        return true;
      });
      return true;
    }
    return false;
  });
  HttpLoadOptions o = options_for(server, SessionReuse::On);
  o.concurrency = 1;
  auto run = run_http_load(o, {conversation("a", {{7}, {8}, {8}}), conversation("b", {{9}, {9}})});
  ASSERT_TRUE(run.ok()) << run.message();
  EXPECT_EQ(run->planned, 5);
  ASSERT_EQ(run->requests.size(), 3u);  // a0 ok, a1 failed, b0 failed
  EXPECT_EQ(run->skipped, 2);           // a2, b1
  int failed = 0;
  for (const auto& r : run->requests) {
    if (r.error.empty()) continue;
    ++failed;
    EXPECT_TRUE(r.record.error);
    if (r.record.session == "a") {
      EXPECT_EQ(r.http_status, 500);
      EXPECT_NE(r.error.find("boom"), std::string::npos) << r.error;
    } else {
      EXPECT_NE(r.error.find("[DONE]"), std::string::npos) << r.error;
    }
  }
  EXPECT_EQ(failed, 2);
  auto m = compute_run_metrics(request_records(*run), run->wall_s);
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->errors, 2u);
  EXPECT_EQ(m->completed, 1u);
}

TEST(HttpLoad, NoServerIsAnErrorRecordNotACrash) {
  HttpLoadOptions o;
  o.endpoint = HttpEndpoint{"http://127.0.0.1:1", ""};  // nothing listens on port 1
  o.encode_reply = char_codes;
  o.timeout_s = 5;
  auto run = run_http_load(o, {conversation("c", {{1}, {2}})});
  ASSERT_TRUE(run.ok()) << run.message();
  ASSERT_EQ(run->requests.size(), 1u);
  EXPECT_EQ(run->requests[0].http_status, 0);
  EXPECT_NE(run->requests[0].error.find("no response"), std::string::npos)
      << run->requests[0].error;
  EXPECT_EQ(run->skipped, 1);
}

TEST(HttpLoad, ClosedLoopKeepsAtMostConcurrencyConversationsActive) {
  FakeServer server;
  server.stream_delay = std::chrono::milliseconds(20);
  HttpLoadOptions o = options_for(server, SessionReuse::On);
  o.concurrency = 2;
  std::vector<Conversation> cs;
  for (int i = 0; i < 5; ++i) cs.push_back(conversation(fmt::format("c{}", i), {{i + 1}, {i + 2}}));
  std::vector<int64_t> progress;
  auto run = run_http_load(o, cs, [&](int64_t done, int64_t total) {
    EXPECT_EQ(total, 10);
    progress.push_back(done);
  });
  ASSERT_TRUE(run.ok()) << run.message();
  EXPECT_EQ(run->requests.size(), 10u);
  EXPECT_LE(server.max_in_flight(), 2);
  ASSERT_EQ(progress.size(), 10u);
  for (size_t i = 0; i < progress.size(); ++i) EXPECT_EQ(progress[i], static_cast<int64_t>(i + 1));
}

TEST(HttpLoad, OpenLoopStartsEachConversationAtItsArrival) {
  FakeServer server;
  std::vector<Conversation> cs = {conversation("a", {{1}}, 0.0), conversation("b", {{2}}, 0.05),
                                  conversation("c", {{3}}, 0.1)};
  auto run = run_http_load(options_for(server, SessionReuse::On), cs);
  ASSERT_TRUE(run.ok()) << run.message();
  ASSERT_EQ(run->requests.size(), 3u);
  for (const auto& r : run->requests) {
    const double arrival = r.record.session == "a" ? 0.0 : r.record.session == "b" ? 0.05 : 0.1;
    EXPECT_GE(r.record.submit_s, arrival) << r.record.session;
  }
  EXPECT_GE(run->wall_s, 0.1);
}

TEST(HttpLoad, InvalidOptionsAreErrors) {
  HttpLoadOptions o;
  o.endpoint = HttpEndpoint{"http://127.0.0.1:1", ""};
  EXPECT_FALSE(run_http_load(o, {}).ok());  // no encoder
  o.encode_reply = char_codes;
  o.concurrency = -1;
  EXPECT_FALSE(run_http_load(o, {}).ok());
  o.concurrency = 0;
  Conversation empty_turn = conversation("x", {{}});
  EXPECT_FALSE(run_http_load(o, {empty_turn}).ok());
}

TEST(HttpLoad, DeleteAllSessionsDeletesWhatTheServerLists) {
  FakeServer server;
  server.add_session("s1");
  server.add_session("s2");
  auto n = delete_all_sessions(server.endpoint(), "k");
  ASSERT_TRUE(n.ok()) << n.message();
  EXPECT_EQ(*n, 2);
  auto deleted = server.deleted();
  std::sort(deleted.begin(), deleted.end());
  EXPECT_EQ(deleted, (std::vector<std::string>{"s1", "s2"}));
  EXPECT_EQ(server.authorizations(), std::vector<std::string>{"Bearer k"});
  EXPECT_FALSE(delete_all_sessions(HttpEndpoint{"http://127.0.0.1:1", ""}, "", 5).ok());
}

TEST(HttpLoad, ServersWithoutTheSessionApiHaveNothingToDelete) {
  httplib::Server bare;  // answers 404 to everything
  const int port = bare.bind_to_any_port("127.0.0.1");
  std::thread t([&] { bare.listen_after_bind(); });
  auto n = delete_all_sessions(HttpEndpoint{"http://127.0.0.1:" + std::to_string(port), ""}, "", 5);
  bare.stop();
  t.join();
  ASSERT_TRUE(n.ok()) << n.message();
  EXPECT_EQ(*n, 0);
}

TEST(HttpLoadHelpers, ParseBaseUrl) {
  auto e = parse_base_url("http://127.0.0.1:8080");
  ASSERT_TRUE(e.ok()) << e.message();
  EXPECT_EQ(e->origin, "http://127.0.0.1:8080");
  EXPECT_EQ(e->base_path, "");
  e = parse_base_url("http://localhost/");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->origin, "http://localhost:80");
  e = parse_base_url("https://api.example.com/proxy/v0//");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->origin, "https://api.example.com:443");
  EXPECT_EQ(e->base_path, "/proxy/v0");
  e = parse_base_url("http://[::1]:9000/x");
  ASSERT_TRUE(e.ok()) << e.message();
  EXPECT_EQ(e->origin, "http://[::1]:9000");
  EXPECT_EQ(e->base_path, "/x");
  for (const char* bad :
       {"127.0.0.1:8080", "ftp://h", "http://", "http://:80", "http://h:0", "http://h:65536",
        "http://h:", "http://h:8x", "http://u:p@h", "http://h/?q=1", "http://[::1"})
    EXPECT_FALSE(parse_base_url(bad).ok()) << bad;
}

TEST(HttpLoadHelpers, SessionIdsAreValidStableWithReuseAndFreshWithout) {
  EXPECT_EQ(turn_session_id("run1", "sharegpt-3", 0, SessionReuse::On), "run1-sharegpt-3");
  EXPECT_EQ(turn_session_id("run1", "sharegpt-3", 2, SessionReuse::On), "run1-sharegpt-3");
  EXPECT_EQ(turn_session_id("run1", "sharegpt-3", 2, SessionReuse::Off), "run1-sharegpt-3-t2");
  EXPECT_EQ(turn_session_id("r", "a b/c", 0, SessionReuse::On), "r-a_b_c");
  const std::string long_id = turn_session_id("r", std::string(300, 'x'), 7, SessionReuse::Off);
  EXPECT_EQ(long_id.size(), 128u);
  EXPECT_EQ(long_id.substr(long_id.size() - 3), "-t7");  // the tail that differs is kept
  EXPECT_NE(turn_session_id("r", std::string(300, 'x'), 8, SessionReuse::Off), long_id);
}

TEST(HttpLoadHelpers, RetryWait) {
  EXPECT_DOUBLE_EQ(retry_wait_s("3", 1, 30), 3.0);
  EXPECT_DOUBLE_EQ(retry_wait_s(" 2 ", 1, 30), 2.0);
  EXPECT_DOUBLE_EQ(retry_wait_s("120", 1, 30), 30.0);  // capped
  EXPECT_DOUBLE_EQ(retry_wait_s("", 1.5, 30), 1.5);    // absent
  EXPECT_DOUBLE_EQ(retry_wait_s("Wed, 21 Oct 2015 07:28:00 GMT", 1, 30), 1.0);
  EXPECT_DOUBLE_EQ(retry_wait_s("-4", 1, 30), 1.0);
  EXPECT_DOUBLE_EQ(retry_wait_s("nan", 1, 30), 1.0);
  EXPECT_DOUBLE_EQ(retry_wait_s("0", 1, 30), 0.0);
}

// A streamed continuation (" there was", the text of the tokens after "Once upon a time")
// re-encodes to exactly those tokens: the leading space is the text's own, not SentencePiece's
// dummy prefix. Encoding it plainly would add a stray prefix token.
TEST(HttpLoadHelpers, EncodeContinuationReproducesTheGeneratedTokens) {
  auto file = GgufFile::open(testing::data_file("models/stories260K/stories260K.gguf").string());
  ASSERT_TRUE(file.ok()) << file.message();
  auto tok = Tokenizer::from_gguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.message();
  const std::vector<int32_t> all = (*tok)->encode("Once upon a time there was a cat", false, false);
  const std::vector<int32_t> head = (*tok)->encode("Once upon a time", false, false);
  ASSERT_GT(all.size(), head.size());
  ASSERT_TRUE(std::equal(head.begin(), head.end(), all.begin()));
  const std::vector<int32_t> tail(all.begin() + static_cast<std::ptrdiff_t>(head.size()),
                                  all.end());
  std::string streamed;  // what a server streams for the tail: the pieces' bytes
  for (int32_t id : tail) streamed += (*tok)->token_to_piece(id);
  ASSERT_EQ(streamed.front(), ' ');
  EXPECT_EQ(encode_continuation(**tok, streamed), tail);
  EXPECT_NE((*tok)->encode(streamed, false, false), tail);
  EXPECT_TRUE(encode_continuation(**tok, "").empty());
  EXPECT_TRUE(encode_continuation(**tok, " ").empty());
}

}  // namespace
}  // namespace tangram
