// The HTTP server core over loopback with raw sockets: keep-alive, pipelining, HEAD, 405,
// streaming, Expect: 100-continue, and what the outside probe found: the whole-request
// deadline (a client dripping bytes), slow clients never starving /health, connection caps,
// Range ignored, header floods refused, and a waiting handler seeing its client leave.
// Nothing here waits on a clock to decide an outcome: every wait is for a condition, with a
// generous bound that only matters when the code is broken.
#include "http/http_server_core.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "support/loopback_socket.h"

namespace tangram::http {
namespace {

using namespace std::chrono_literals;

class Socket {
 public:
  explicit Socket(int port) : fd_(testing::connect_loopback(port)), connected_(fd_ >= 0) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  bool connected() const { return connected_; }
  bool send(const std::string& s) {
    return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
  }
  void close() {
    ::close(fd_);
    fd_ = -1;
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  // Reads until `done(buffer)` or the peer closes or `bound` passes; returns what arrived.
  template <typename Done>
  std::string read_until(Done done, std::chrono::milliseconds bound = 20000ms) {
    const auto end = std::chrono::steady_clock::now() + bound;
    while (!done(buf_) && !eof_ && std::chrono::steady_clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char b[65536];
      const ssize_t n = ::recv(fd_, b, sizeof b, 0);
      if (n <= 0)
        eof_ = true;
      else
        buf_.append(b, static_cast<size_t>(n));
    }
    return buf_;
  }
  // One whole response (Content-Length or chunked), removed from the buffer.
  std::string response() {
    auto complete = [](const std::string& b) -> size_t {
      const size_t head = b.find("\r\n\r\n");
      if (head == std::string::npos) return 0;
      const std::string h = b.substr(0, head);
      if (h.find("Transfer-Encoding: chunked") != std::string::npos) {
        const size_t end = b.find("\r\n0\r\n\r\n", head);
        return end == std::string::npos ? 0 : end + 7;
      }
      const size_t cl = h.find("Content-Length: ");
      const size_t len = cl == std::string::npos ? 0 : std::stoul(h.substr(cl + 16));
      return b.size() >= head + 4 + len ? head + 4 + len : 0;
    };
    read_until([&](const std::string& b) { return complete(b) > 0; });
    const size_t n = complete(buf_);
    std::string r = buf_.substr(0, n == 0 ? buf_.size() : n);
    buf_.erase(0, r.size());
    return r;
  }
  bool closed_by_peer(std::chrono::milliseconds bound = 20000ms) {
    read_until([](const std::string&) { return false; }, bound);
    return eof_;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  std::string buf_;
};

int status_of(const std::string& response) {
  if (response.size() < 12 || response.compare(0, 9, "HTTP/1.1 ") != 0) return -1;
  return std::stoi(response.substr(9, 3));
}

std::string body_of(const std::string& response) {
  const size_t head = response.find("\r\n\r\n");
  return head == std::string::npos ? "" : response.substr(head + 4);
}

// A running core on a free loopback port, with a few routes.
class CoreFixture : public ::testing::Test {
 protected:
  void start(ServerCoreOptions o) {
    o.host = "127.0.0.1";
    o.port = 0;
    core_ = std::make_unique<ServerCore>(o);
    core_->route("GET", "/health", Lane::Control,
                 [](Request&, Response& res) { res.set_content("ok", "text/plain"); });
    core_->route("GET", "/big", Lane::Control, [](Request&, Response& res) {
      res.set_content(std::string(10000, 'b'), "text/plain");
    });
    core_->route("POST", "/echo", Lane::Work,
                 [](Request& req, Response& res) { res.set_content(req.body, "text/plain"); });
    core_->route("DELETE", "/items/:id", Lane::Control, [](Request& req, Response& res) {
      res.set_content("deleted " + req.params.at(0), "text/plain");
    });
    core_->route("POST", "/block", Lane::Work, [this](Request&, Response& res) {
      std::unique_lock lock(mu_);
      ++blocked_;
      cv_.notify_all();
      cv_.wait_for(lock, 30s, [&] { return release_; });
      res.set_content("released", "text/plain");
    });
    core_->route("POST", "/wait-for-hangup", Lane::Work, [this](Request& req, Response& res) {
      {
        std::lock_guard lock(mu_);
        ++blocked_;
      }
      cv_.notify_all();
      const auto end = std::chrono::steady_clock::now() + 30s;
      while (!req.peer_closed() && std::chrono::steady_clock::now() < end)
        std::this_thread::sleep_for(20ms);
      std::lock_guard lock(mu_);
      saw_hangup_ = req.peer_closed();
      cv_.notify_all();
      res.abandon = true;
    });
    // Waits until the test has half-closed its side, then looks at the client several times.
    core_->route("POST", "/look-after-half-close", Lane::Work, [this](Request& req, Response& res) {
      {
        std::unique_lock lock(mu_);
        ++blocked_;
        cv_.notify_all();
        cv_.wait_for(lock, 30s, [&] { return release_; });
      }
      bool gone = false;
      for (int i = 0; i < 20 && !gone; ++i) {
        gone = req.peer_closed();
        std::this_thread::sleep_for(10ms);
      }
      res.set_content(gone ? "gone" : "stayed", "text/plain");
    });
    core_->set_head_check([](const Request& req, Response& res) {
      if (req.header("X-Refuse").empty()) return false;
      res.status = 401;
      res.set_content("refused on its head", "text/plain");
      return true;
    });
    core_->route("GET", "/stream", Lane::Work, [](Request&, Response& res) {
      res.set_stream("text/event-stream", [](StreamSink& sink) {
        for (int i = 0; i < 3; ++i) sink.write("data: " + std::to_string(i) + "\n\n");
      });
    });
    core_->set_error_filler([](const Request&, Response& res, const std::string& message) {
      res.set_content("{\"error\": \"" + message + "\"}", "application/json");
    });
    auto port = core_->bind();
    ASSERT_TRUE(port.ok()) << port.message();
    port_ = *port;
    thread_ = std::thread([this] { (void)core_->serve(); });
  }
  void TearDown() override {
    {
      std::lock_guard lock(mu_);
      release_ = true;
    }
    cv_.notify_all();
    if (core_) core_->stop();
    if (thread_.joinable()) thread_.join();
  }
  void wait_blocked(int n) {
    std::unique_lock lock(mu_);
    ASSERT_TRUE(cv_.wait_for(lock, 30s, [&] { return blocked_ >= n; }));
  }
  void wait_connections(size_t n) {
    for (int i = 0; i < 3000 && core_->connections() < n; ++i) std::this_thread::sleep_for(10ms);
    ASSERT_GE(core_->connections(), n);
  }

  std::unique_ptr<ServerCore> core_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  int blocked_ = 0;
  bool release_ = false;
  bool saw_hangup_ = false;
};

TEST_F(CoreFixture, KeepAlivePipeliningHeadAnd405) {
  start({});
  Socket s(port_);
  ASSERT_TRUE(s.connected());
  // Two requests in one write: two answers, in order, on the same connection.
  ASSERT_TRUE(
      s.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /health "
             "HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string a = s.response(), b = s.response();
  EXPECT_EQ(status_of(a), 200);
  EXPECT_EQ(body_of(a), "abc");
  EXPECT_EQ(body_of(b), "ok");
  ASSERT_TRUE(s.send("HEAD /big HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string head =
      s.read_until([](const std::string& x) { return x.find("\r\n\r\n") != std::string::npos; });
  EXPECT_NE(head.find("Content-Length: 10000"), std::string::npos);
  EXPECT_EQ(body_of(head), "");
  Socket t(port_);
  ASSERT_TRUE(t.send("POST /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string r = t.response();
  EXPECT_EQ(status_of(r), 405);
  EXPECT_NE(r.find("Allow: GET"), std::string::npos);
  ASSERT_TRUE(
      t.send("DELETE /items/a%2Fb HTTP/1.1\r\nHost: x\r\n\r\n"));  // a decoded '/' splits no
                                                                   // segment it came from
  EXPECT_EQ(status_of(t.response()), 404);
  ASSERT_TRUE(t.send("DELETE /items/x1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(body_of(t.response()), "deleted x1");
  EXPECT_TRUE(t.closed_by_peer());
}

TEST_F(CoreFixture, StreamsChunksAndContinues) {
  start({});
  Socket s(port_);
  ASSERT_TRUE(s.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string r = s.response();
  EXPECT_NE(r.find("Transfer-Encoding: chunked"), std::string::npos);
  EXPECT_NE(r.find("data: 2"), std::string::npos);
  // Expect: 100-continue: the body is sent only after the interim answer.
  ASSERT_TRUE(s.send(
      "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"));
  const std::string interim = s.read_until(
      [](const std::string& x) { return x.find("100 Continue\r\n\r\n") != std::string::npos; });
  ASSERT_NE(interim.find("HTTP/1.1 100 Continue"), std::string::npos);
  s.response();  // consume the interim answer from the buffer
  ASSERT_TRUE(s.send("hi"));
  const std::string final_answer = s.response();
  EXPECT_EQ(body_of(final_answer), "hi") << final_answer;
}

TEST_F(CoreFixture, RangeIsIgnored) {
  start({});
  Socket s(port_);
  std::string ranges = "bytes=0-";
  for (int i = 0; i < 2000; ++i) ranges += ",0-";
  ASSERT_TRUE(s.send("GET /big HTTP/1.1\r\nHost: x\r\nRange: " + ranges + "\r\n\r\n"));
  const std::string r = s.response();
  EXPECT_EQ(status_of(r), 200);
  EXPECT_EQ(body_of(r).size(), 10000u);  // the whole body once: never 206, never multipart
  EXPECT_EQ(r.find("multipart"), std::string::npos);
}

TEST_F(CoreFixture, AHeaderFloodIsRefusedWith431) {
  start({});
  Socket s(port_);
  std::string flood = "GET /health HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 200; ++i)
    flood += "X-" + std::to_string(i) + ": " + std::string(100, 'v') + "\r\n";
  s.send(flood + "\r\n");
  EXPECT_EQ(status_of(s.response()), 431);
  EXPECT_TRUE(s.closed_by_peer());
}

TEST_F(CoreFixture, TheReadTimeoutBoundsTheWholeRequestNotEachByte) {
  ServerCoreOptions o;
  o.read_timeout_s = 1;
  start(o);
  Socket s(port_);
  ASSERT_TRUE(s.send("POST /echo HTTP/1.1\r\nHost: x\r\n"));
  // Drip a header byte every 100 ms for up to 20 s: a per-read timeout would never fire.
  bool closed = false;
  std::string got;
  for (int i = 0; i < 200 && !closed; ++i) {
    s.send("X");
    got = s.read_until([](const std::string& x) { return !x.empty(); }, 100ms);
    closed = !got.empty();
  }
  EXPECT_TRUE(closed) << "a dripping client kept its connection for 20 s with a 1 s read timeout";
  EXPECT_EQ(status_of(got), 408);
}

TEST_F(CoreFixture, SlowClientsNeverStarveHealthOrTheWorkers) {
  ServerCoreOptions o;
  o.work_threads = 1;
  o.control_threads = 1;
  start(o);
  // 100 connections stuck mid-head hold no worker: they are read by the reactor.
  std::vector<std::unique_ptr<Socket>> slow;
  for (int i = 0; i < 100; ++i) {
    slow.push_back(std::make_unique<Socket>(port_));
    slow.back()->send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Le");
  }
  // The only work thread is busy, too.
  Socket busy(port_);
  ASSERT_TRUE(busy.send("POST /block HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
  wait_blocked(1);
  Socket h(port_);
  ASSERT_TRUE(h.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(body_of(h.response()), "ok");
}

TEST_F(CoreFixture, ConnectionsAreCappedPerAddress) {
  ServerCoreOptions o;
  o.max_connections_per_ip = 3;
  start(o);
  std::vector<std::unique_ptr<Socket>> held;
  for (int i = 0; i < 3; ++i) held.push_back(std::make_unique<Socket>(port_));
  wait_connections(3);
  Socket extra(port_);
  const std::string r = extra.read_until(
      [](const std::string& x) { return x.find("\r\n\r\n") != std::string::npos; });
  EXPECT_EQ(status_of(r), 503);
  EXPECT_NE(r.find("Retry-After"), std::string::npos);
  EXPECT_TRUE(extra.closed_by_peer());
  held.pop_back();  // one leaves: a new one is admitted
  for (int i = 0; i < 3000 && core_->connections() > 2; ++i) std::this_thread::sleep_for(10ms);
  Socket next(port_);
  ASSERT_TRUE(next.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(body_of(next.response()), "ok");
}

TEST_F(CoreFixture, AWaitingHandlerSeesItsClientLeave) {
  start({});
  auto s = std::make_unique<Socket>(port_);
  ASSERT_TRUE(s->send("POST /wait-for-hangup HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
  wait_blocked(1);
  {
    std::lock_guard lock(mu_);
    EXPECT_FALSE(saw_hangup_);
  }
  s->close();
  std::unique_lock lock(mu_);
  EXPECT_TRUE(cv_.wait_for(lock, 30s, [&] { return saw_hangup_; }));
}

TEST_F(CoreFixture, AHalfClosedClientStillGetsItsAnswer) {
  // A complete request, then shutdown(SHUT_WR): the client reads on. Its EOF is probed with one
  // interim 100 (which a closed socket would answer with a reset), and the answer follows it.
  start({});
  Socket s(port_);
  ASSERT_TRUE(
      s.send("POST /look-after-half-close HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
  wait_blocked(1);
  s.shutdown_write();
  {
    std::lock_guard lock(mu_);
    release_ = true;
  }
  cv_.notify_all();
  std::string got = s.read_until([](const std::string& b) {
    return b.find("stayed") != std::string::npos || b.find("gone") != std::string::npos;
  });
  EXPECT_EQ(got.rfind("HTTP/1.1 100 Continue\r\n\r\n", 0), 0u) << got;
  EXPECT_NE(got.find("HTTP/1.1 200 OK"), std::string::npos) << got;
  EXPECT_NE(got.find("stayed"), std::string::npos) << got;
}

TEST_F(CoreFixture, TheHeadCheckAnswersBeforeAnyBodyAndSendsNoContinue) {
  start({});
  // Refused: the answer comes with no body byte sent, and never a "100 Continue".
  Socket refused(port_);
  ASSERT_TRUE(
      refused.send("POST /echo HTTP/1.1\r\nHost: x\r\nX-Refuse: 1\r\nExpect: 100-continue\r\n"
                   "Content-Length: 8000000\r\n\r\n"));
  const std::string answer = refused.response();
  EXPECT_EQ(status_of(answer), 401) << answer;
  EXPECT_EQ(body_of(answer), "refused on its head");
  EXPECT_EQ(answer.find("100 Continue"), std::string::npos);
  EXPECT_TRUE(refused.closed_by_peer());
  // Let through: "100 Continue", then the body is read and the handler runs.
  Socket admitted(port_);
  ASSERT_TRUE(admitted.send(
      "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"));
  const std::string go_on = admitted.read_until(
      [](const std::string& b) { return b.find("\r\n\r\n") != std::string::npos; });
  EXPECT_EQ(go_on.rfind("HTTP/1.1 100 Continue\r\n\r\n", 0), 0u) << go_on;
  ASSERT_TRUE(admitted.send("ok"));
  const std::string reply = admitted.read_until(
      [](const std::string& b) { return b.size() >= 2 && b.substr(b.size() - 2) == "ok"; });
  EXPECT_NE(reply.find("HTTP/1.1 200 OK"), std::string::npos) << reply;
}

TEST_F(CoreFixture, StopEndsHandlersWaitingOnTheirClient) {
  start({});
  Socket s(port_);
  ASSERT_TRUE(s.send("POST /wait-for-hangup HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
  wait_blocked(1);
  core_->stop();
  thread_.join();  // returns: the connection was shut down under the waiting handler
  std::lock_guard lock(mu_);
  EXPECT_TRUE(saw_hangup_);
}

TEST_F(CoreFixture, BodiesHeldAtOnceStayWithinTheirBudget) {
  ServerCoreOptions o;
  o.limits.max_body = 1000;
  o.max_buffered_body = 1500;
  start(o);
  // One request holds 900 bytes of its body while the rest is still to come.
  Socket a(port_);
  ASSERT_TRUE(a.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" +
                     std::string(900, 'a')));
  for (int i = 0; i < 3000 && core_->buffered_body_bytes() < 900; ++i)
    std::this_thread::sleep_for(10ms);
  ASSERT_EQ(core_->buffered_body_bytes(), 900u);
  // A second body that would pass the budget is refused while that one is held.
  Socket b(port_);
  ASSERT_TRUE(b.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" +
                     std::string(1000, 'b')));
  const std::string refused = b.response();
  EXPECT_EQ(status_of(refused), 503) << refused;
  EXPECT_NE(refused.find("Retry-After: 1"), std::string::npos);
  // The first completes; once answered, its bytes are back and the next body fits.
  ASSERT_TRUE(a.send(std::string(100, 'a')));
  EXPECT_EQ(body_of(a.response()), std::string(900, 'a') + std::string(100, 'a'));
  for (int i = 0; i < 3000 && core_->buffered_body_bytes() > 0; ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(core_->buffered_body_bytes(), 0u);
  Socket c(port_);
  ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" +
                     std::string(1000, 'c')));
  EXPECT_EQ(status_of(c.response()), 200);
}

TEST_F(CoreFixture, BodiesOverTheLimitGet413WhateverTheirFraming) {
  ServerCoreOptions o;
  o.limits.max_body = 100;
  start(o);
  Socket s(port_);
  std::string chunks;
  for (int i = 0; i < 10; ++i) chunks += "20\r\n" + std::string(32, 'c') + "\r\n";
  ASSERT_TRUE(s.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
                     chunks + "0\r\n\r\n"));
  EXPECT_EQ(status_of(s.response()), 413);
}

}  // namespace
}  // namespace tangram::http
