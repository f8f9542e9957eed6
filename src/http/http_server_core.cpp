#include "http/http_server_core.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>

namespace tangram::http {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kBacklog = 1024;
constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kMaxReadPerWakeup = size_t{1} << 20;  // fairness between connections
// After an error answer the rest of the request is read and dropped for a while before the
// close, so the client reads the answer instead of a reset (closing a socket with unread input
// sends RST, which can destroy the answer in flight).
constexpr size_t kMaxDrainBytes = size_t{16} << 20;
constexpr auto kDrainTime = std::chrono::seconds(3);
constexpr size_t kTrimAfterBody = size_t{256} << 10;

// A fixed set of threads running posted tasks in order; shutdown drops what has not started.
class WorkerPool {
 public:
  void start(int n) {
    for (int i = 0; i < std::max(1, n); ++i) threads_.emplace_back([this] { run(); });
  }
  void post(std::function<void()> task) {
    {
      std::lock_guard lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }
  void shutdown() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      tasks_.clear();
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
        if (stop_) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  bool stop_ = false;
};

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t slash = path.find('/', start);
    out.emplace_back(path.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (slash == std::string_view::npos) return out;
    start = slash + 1;
  }
}

// Writes all of `data` to a non-blocking socket, waiting at most `timeout_ms` for each bit of
// progress. False when the client is gone or stalled.
bool send_all(int fd, std::string_view data, int timeout_ms) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      const int r = ::poll(&p, 1, timeout_ms);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL))) return false;
      continue;
    }
    return false;
  }
  return true;
}

// Whether the client of a request still waiting for its answer has gone. A read EOF alone is not
// enough: a client may half-close (shutdown(SHUT_WR) after its request) and still read the
// answer. So the first EOF seen on an HTTP/1.1 connection is probed with one interim
// "100 Continue" (RFC 9110 15.2: a client must accept a 1xx before the final answer): a socket
// the client has closed answers it with a reset, which a later look sees as POLLHUP/POLLERR, and
// a half-closed client skips it. HTTP/1.0 allows no interim answer: there an EOF counts as gone.
class PeerWatch {
 public:
  PeerWatch(int fd, bool http11) : fd_(fd), http11_(http11) {}

  bool gone() {
    pollfd p{fd_, static_cast<short>(POLLIN | POLLRDHUP), 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return true;  // reset, or closed both ways
    bool eof = (p.revents & POLLRDHUP) != 0;
    if (!eof && (p.revents & POLLIN)) {  // pipelined bytes of a next request are not an EOF
      char c;
      const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
      eof = n == 0;
    }
    if (!eof) return false;
    if (!http11_) return true;
    if (!probed_) {
      probed_ = true;
      static constexpr std::string_view kProbe = "HTTP/1.1 100 Continue\r\n\r\n";
      const ssize_t n = ::send(fd_, kProbe.data(), kProbe.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
    }
    return false;
  }

 private:
  int fd_;
  bool http11_;
  bool probed_ = false;
};

std::string address_of(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, buf, sizeof buf);
  else if (ss.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof buf);
  return buf;
}

// Chunks of a streamed response, each sent as it is written.
class ChunkSink final : public StreamSink {
 public:
  ChunkSink(int fd, int timeout_ms) : fd_(fd), timeout_ms_(timeout_ms) {}
  bool write(std::string_view data) override {
    if (!ok_) return false;
    if (data.empty()) return true;  // an empty chunk would end the stream
    std::string framed = fmt::format("{:x}\r\n", data.size());
    framed.append(data);
    framed.append("\r\n");
    ok_ = send_all(fd_, framed, timeout_ms_);
    return ok_;
  }
  bool ok() const { return ok_; }

 private:
  int fd_;
  int timeout_ms_;
  bool ok_ = true;
};

}  // namespace

struct Conn {
  int fd = -1;
  std::string ip;
  std::string inbuf;  // received, not yet parsed (pipelined bytes of the next request included)
  RequestParser parser;
  Clock::time_point deadline;
  bool started = false;        // a byte of the current request has arrived
  bool head_checked = false;   // the head check has let the current request through
  size_t body_budget = 0;      // bytes of the buffered-body budget this request's body holds
  bool continue_sent = false;  // "100 Continue" for the current request
  bool draining = false;       // answered with an error: read and discard until the client closes
  size_t drained = 0;
  int served = 0;
  // The parser holds each body until the head check has let the request through.
  explicit Conn(const Limits& limits) : parser(limits, /*hold_body=*/true) {}
};

struct Route {
  std::string method;
  std::vector<std::string> segments;
  Lane lane;
  Handler handler;
};

struct ServerCore::Impl {
  ServerCoreOptions opt;
  std::vector<Route> routes;
  std::function<bool(const Request&, Response&)> head_check;
  std::function<void(const Request&, const Response&)> after;
  std::function<void(const Request&, Response&, const std::string&)> filler;

  int listen_fd = -1;
  int epoll_fd = -1;
  int wake_fd = -1;
  std::atomic<bool> stopping{false};
  std::atomic<size_t> buffered_body{0};  // body bytes held over all connections (max_buffered_body)
  std::optional<Clock::time_point> accept_paused_until;  // reactor only
  WorkerPool work_pool, control_pool;
  std::unordered_map<int, std::shared_ptr<Conn>> reading;  // reactor only

  mutable std::mutex mu;  // guards what workers and the reactor share
  std::unordered_set<int> open_fds;
  std::map<std::string, size_t> per_ip;
  std::vector<std::shared_ptr<Conn>> returned;
  bool closed = false;  // the reactor has stopped taking connections back

  explicit Impl(ServerCoreOptions o) : opt(std::move(o)) {
    if (opt.max_buffered_body == 0) opt.max_buffered_body = 32 * opt.limits.max_body;
    // Each connection is a descriptor: allow as many as the hard limit lets us, and stay below.
    rlimit rl{};
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
      if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
      }
      if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur > 128)
        opt.max_connections =
            std::min<size_t>(opt.max_connections, static_cast<size_t>(rl.rlim_cur) - 96);
    }
  }

  ~Impl() {
    if (listen_fd >= 0) ::close(listen_fd);
    if (epoll_fd >= 0) ::close(epoll_fd);
    if (wake_fd >= 0) ::close(wake_fd);
  }

  // ---- connections -------------------------------------------------------------------------

  void close_conn(Conn& c) {
    std::lock_guard lock(mu);
    if (c.fd < 0) return;
    open_fds.erase(c.fd);
    if (auto it = per_ip.find(c.ip); it != per_ip.end() && --it->second == 0) per_ip.erase(it);
    ::close(c.fd);
    c.fd = -1;
  }

  void accept_all() {
    for (;;) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      const int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len,
                               SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: the backlog keeps the connections; stop watching the listening
          // socket for a moment rather than spin on it.
          epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
          accept_paused_until = Clock::now() + std::chrono::milliseconds(100);
        }
        return;
      }
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // stream chunks leave at once
      auto c = std::make_shared<Conn>(opt.limits);
      c->fd = fd;
      c->ip = address_of(ss);
      bool refused = false;
      {
        std::lock_guard lock(mu);
        refused =
            open_fds.size() >= opt.max_connections || per_ip[c->ip] >= opt.max_connections_per_ip;
        if (!refused) {
          open_fds.insert(fd);
          ++per_ip[c->ip];
        } else if (per_ip[c->ip] == 0) {
          per_ip.erase(c->ip);
        }
      }
      if (refused) {
        refuse_connection(fd, c->ip);
        continue;
      }
      c->deadline = Clock::now() + std::chrono::seconds(opt.read_timeout_s);
      watch(c);
    }
  }

  // Over a connection cap: a short 503 (best effort, never blocking the reactor), then close.
  void refuse_connection(int fd, const std::string& ip) {
    Request req;
    req.remote_addr = ip;
    Response res;
    res.status = 503;
    res.set_header("Retry-After", "1");
    if (filler) filler(req, res, "too many connections from this address or in all; retry shortly");
    const std::string wire = head_of(req, res, false, res.body.size()) + res.body;
    [[maybe_unused]] const ssize_t n =
        ::send(fd, wire.data(), wire.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::close(fd);
  }

  void watch(const std::shared_ptr<Conn>& c) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = c->fd;
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, c->fd, &ev);
    reading[c->fd] = c;
  }

  void unwatch(const std::shared_ptr<Conn>& c) {
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, nullptr);
    reading.erase(c->fd);
  }

  void drop(const std::shared_ptr<Conn>& c) {
    unwatch(c);
    release_budget(*c);
    close_conn(*c);
  }

  // The body bytes a request holds go back to the budget (its body was handled or dropped).
  void release_budget(Conn& c) {
    buffered_body.fetch_sub(c.body_budget);
    c.body_budget = 0;
  }

  // Counts what the current request's body holds now; false (and answered 503) when the
  // bodies held over all connections would pass the budget.
  bool charge_budget(const std::shared_ptr<Conn>& c) {
    const size_t held = c->parser.request().body.size();
    if (held <= c->body_budget) return true;
    const size_t grow = held - c->body_budget;
    if (buffered_body.fetch_add(grow) + grow > opt.max_buffered_body) {
      buffered_body.fetch_sub(grow);
      Request req = c->parser.request();
      req.body.clear();
      req.remote_addr = c->ip;
      Response res;
      res.status = 503;
      res.set_header("Retry-After", "1");
      if (filler)
        filler(req, res, "the server holds too many request bodies at once; retry shortly");
      dispatch_answer(c, std::make_shared<Request>(std::move(req)), std::move(res));
      return false;
    }
    c->body_budget = held;
    return true;
  }

  // ---- reading -------------------------------------------------------------------------------

  void on_readable(const std::shared_ptr<Conn>& c) {
    char buf[kReadChunk];
    size_t total = 0;
    while (total < kMaxReadPerWakeup) {
      const ssize_t n = ::recv(c->fd, buf, sizeof buf, 0);
      if (n > 0 && c->draining) {
        c->drained += static_cast<size_t>(n);
        if (c->drained > kMaxDrainBytes) return drop(c);
        continue;
      }
      if (n > 0) {
        total += static_cast<size_t>(n);
        c->inbuf.append(buf, static_cast<size_t>(n));
        if (!advance(c)) return;  // handed to a worker or closed
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      drop(c);  // the client hung up (mid-request or between requests): nothing to answer
      return;
    }
  }

  // Parses what is buffered; false once the connection left the reactor (dispatched or closed).
  bool advance(const std::shared_ptr<Conn>& c) {
    if (c->inbuf.empty()) return true;
    if (!c->started) {
      c->started = true;
      c->deadline = Clock::now() + std::chrono::seconds(opt.read_timeout_s);
    }
    for (;;) {
      const size_t used = c->parser.feed(c->inbuf);
      c->inbuf.erase(0, used);
      if (c->parser.head_complete() && !c->head_checked &&
          c->parser.state() != RequestParser::State::Failed) {
        if (!admit(c)) return false;
        c->parser.release_body();
        if (c->parser.wants_continue() && !c->continue_sent) {
          // Only now, with the head accepted: an unauthenticated client never hears "go on".
          c->continue_sent = true;
          static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
          [[maybe_unused]] const ssize_t n =
              ::send(c->fd, kContinue.data(), kContinue.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        if (!c->inbuf.empty()) continue;  // body bytes that came with the head
      }
      break;
    }
    if (c->parser.state() != RequestParser::State::Failed && !charge_budget(c)) return false;
    switch (c->parser.state()) {
      case RequestParser::State::Complete:
        dispatch(c);
        return false;
      case RequestParser::State::Failed:
        dispatch_error(c, c->parser.error_status(), c->parser.error_message());
        return false;
      default:
        return true;
    }
  }

  // The head check on a request whose head is complete, before any of its body is read; false
  // when it answered (the answer is on its way and the connection leaves the reactor).
  bool admit(const std::shared_ptr<Conn>& c) {
    c->head_checked = true;
    if (!head_check) return true;
    Request req = c->parser.request();
    req.remote_addr = c->ip;
    Response res;
    bool answered = false;
    try {
      answered = head_check(req, res);
    } catch (const std::exception& e) {
      answered = true;
      res = Response{};
      res.status = 500;
      if (filler) filler(req, res, fmt::format("internal error: {}", e.what()));
    }
    if (!answered) return true;
    dispatch_answer(c, std::make_shared<Request>(std::move(req)), std::move(res));
    return false;
  }

  void expire() {
    const auto now = Clock::now();
    std::vector<std::shared_ptr<Conn>> late;
    for (auto& [fd, c] : reading)
      if (c->deadline <= now) late.push_back(c);
    for (auto& c : late) {
      if (c->started && !c->draining)
        dispatch_error(
            c, 408,
            fmt::format("the request did not arrive whole within {} s", opt.read_timeout_s));
      else
        drop(c);  // an idle keep-alive connection
    }
  }

  // ---- dispatch ------------------------------------------------------------------------------

  struct Match {
    const Route* route = nullptr;
    std::vector<std::string> params;
    std::string allow;  // methods of routes whose path matched, for a 405
  };

  Match match(const Request& req) const {
    Match m;
    const std::vector<std::string> parts = split_path(req.path);
    for (const Route& r : routes) {
      if (r.segments.size() != parts.size()) continue;
      std::vector<std::string> params;
      bool ok = true;
      for (size_t i = 0; i < parts.size() && ok; ++i) {
        if (!r.segments[i].empty() && r.segments[i][0] == ':') {
          ok = !parts[i].empty();
          params.push_back(parts[i]);
        } else {
          ok = r.segments[i] == parts[i];
        }
      }
      if (!ok) continue;
      if (r.method == req.method || (r.method == "GET" && req.method == "HEAD")) {
        m.route = &r;
        m.params = std::move(params);
        return m;
      }
      m.allow += (m.allow.empty() ? "" : ", ") + r.method;
    }
    return m;
  }

  void dispatch(const std::shared_ptr<Conn>& c) {
    unwatch(c);
    auto req = std::make_shared<Request>(c->parser.take());
    req->remote_addr = c->ip;
    c->started = false;
    c->continue_sent = false;
    c->head_checked = false;
    Match m = match(*req);
    const Lane lane = m.route ? m.route->lane : Lane::Control;
    const size_t budget = std::exchange(c->body_budget, 0);  // the body now belongs to the task
    auto task = [this, c, req, budget, m = std::move(m)]() mutable {
      serve_request(c, *req, m);
      // A large body's memory (and what parsing it cost) goes back to the system, so the
      // process' resident size returns near its baseline after large requests.
      const bool large = req->body.capacity() >= kTrimAfterBody;
      req.reset();
      buffered_body.fetch_sub(budget);
      if (large) malloc_trim(0);
    };
    (lane == Lane::Work ? work_pool : control_pool).post(std::move(task));
  }

  void dispatch_error(const std::shared_ptr<Conn>& c, int status, const std::string& message) {
    auto req = std::make_shared<Request>(c->parser.request());
    req->remote_addr = c->ip;
    Response res;
    res.status = status;
    if (filler) filler(*req, res, message);
    dispatch_answer(c, std::move(req), std::move(res));
  }

  // Answers without running a handler (a refused head, a request the parser refused), then
  // closes: whatever the client still sends is read and dropped for a while, not buffered.
  void dispatch_answer(const std::shared_ptr<Conn>& c, std::shared_ptr<Request> req,
                       Response answer) {
    unwatch(c);
    release_budget(*c);  // what the body held so far is dropped with it
    control_pool.post([this, c, req = std::move(req), res = std::move(answer)]() mutable {
      if (after) after(*req, res);
      if (!write_response(*c, *req, res, /*keep_alive=*/false)) return close_conn(*c);
      ::shutdown(c->fd, SHUT_WR);  // the answer is complete: the client sees EOF after it
      c->draining = true;
      give_back(c);
    });
  }

  void serve_request(const std::shared_ptr<Conn>& c, Request& req, Match& m) {
    req.peer_closed = [watch = std::make_shared<PeerWatch>(c->fd, req.version_minor >= 1)] {
      return watch->gone();
    };
    req.params = std::move(m.params);
    Response res;
    try {
      if (m.route) {
        m.route->handler(req, res);
      } else {
        res.status = m.allow.empty() ? 404 : 405;
        if (!m.allow.empty()) res.set_header("Allow", m.allow);
        if (filler)
          filler(req, res,
                 m.allow.empty() ? fmt::format("no route for {} {}", req.method, req.path)
                                 : fmt::format("{} is not allowed on {}; use {}", req.method,
                                               req.path, m.allow));
      }
    } catch (const std::exception& e) {
      res = Response{};
      res.status = 500;
      if (filler) filler(req, res, fmt::format("internal error: {}", e.what()));
    } catch (...) {
      res = Response{};
      res.status = 500;
      if (filler) filler(req, res, "internal error");
    }
    if (after) after(req, res);
    ++c->served;
    const bool keep =
        req.keep_alive() && c->served < opt.keep_alive_max_requests && !stopping.load();
    if (write_response(*c, req, res, keep) && keep)
      give_back(c);
    else
      close_conn(*c);
  }

  std::string head_of(const Request& req, const Response& res, bool keep_alive,
                      size_t length) const {
    std::string h = fmt::format("HTTP/1.1 {} {}\r\n", res.status, status_reason(res.status));
    for (const Header& x : res.headers) {
      if (iequals(x.name, "Content-Length") || iequals(x.name, "Transfer-Encoding") ||
          iequals(x.name, "Connection"))
        continue;  // the core frames the body itself
      h += x.name;
      h += ": ";
      h += x.value;
      h += "\r\n";
    }
    if (res.stream)
      h += "Transfer-Encoding: chunked\r\n";
    else
      h += fmt::format("Content-Length: {}\r\n", length);
    if (!keep_alive)
      h += "Connection: close\r\n";
    else if (req.version_minor == 0)
      h += "Connection: keep-alive\r\n";
    h += "\r\n";
    return h;
  }

  bool write_response(Conn& c, const Request& req, Response& res, bool keep_alive) {
    if (c.fd < 0 || res.abandon) return false;
    const int timeout_ms = opt.write_timeout_s * 1000;
    const bool head_only = req.method == "HEAD";
    if (res.stream && !head_only && req.version_minor >= 1) {
      if (!send_all(c.fd, head_of(req, res, keep_alive, 0), timeout_ms)) return false;
      ChunkSink sink(c.fd, timeout_ms);
      res.stream(sink);
      return sink.ok() && send_all(c.fd, "0\r\n\r\n", timeout_ms);
    }
    if (res.stream) {
      // HTTP/1.0 has no chunked coding: the stream is collected and sent whole.
      struct Collect final : StreamSink {
        std::string all;
        bool write(std::string_view d) override {
          all.append(d);
          return true;
        }
      } collect;
      if (!head_only) res.stream(collect);
      res.stream = nullptr;
      res.body = std::move(collect.all);
    }
    std::string wire = head_of(req, res, keep_alive, res.body.size());
    if (!head_only) wire += res.body;
    return send_all(c.fd, wire, timeout_ms);
  }

  // A worker is done with a kept-alive connection: the reactor reads its next request.
  void give_back(const std::shared_ptr<Conn>& c) {
    bool queued = false;
    {
      std::lock_guard lock(mu);
      if (!closed) {
        returned.push_back(c);
        queued = true;
      }
    }
    if (!queued) {  // the reactor has stopped
      close_conn(*c);
      return;
    }
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd, &one, sizeof one);
  }

  void take_back() {
    std::vector<std::shared_ptr<Conn>> back;
    {
      std::lock_guard lock(mu);
      back.swap(returned);
    }
    for (auto& c : back) {
      if (c->fd < 0) continue;
      c->deadline = Clock::now() + (c->draining ? std::chrono::seconds(kDrainTime)
                                                : std::chrono::seconds(opt.keep_alive_s));
      watch(c);
      if (c->draining) continue;
      advance(c);  // a pipelined request may already be buffered
    }
  }

  // ---- the loop --------------------------------------------------------------------------------

  Status run() {
    for (int fd : {listen_fd, wake_fd}) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = fd;
      epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev);
    }
    work_pool.start(opt.work_threads);
    control_pool.start(opt.control_threads);
    epoll_event events[64];
    while (!stopping.load()) {
      const int n = epoll_wait(epoll_fd, events, 64, 250);
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == listen_fd) {
          accept_all();
        } else if (fd == wake_fd) {
          uint64_t v;
          [[maybe_unused]] const ssize_t r = ::read(wake_fd, &v, sizeof v);
          take_back();
        } else if (auto it = reading.find(fd); it != reading.end()) {
          auto c = it->second;
          on_readable(c);
        }
      }
      expire();
      if (accept_paused_until && Clock::now() >= *accept_paused_until) {
        accept_paused_until.reset();
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = listen_fd;
        epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev);
      }
    }
    shut_down();
    return Status::Ok();
  }

  void shut_down() {
    ::close(listen_fd);
    listen_fd = -1;
    std::vector<std::shared_ptr<Conn>> idle;
    for (auto& [fd, c] : reading) idle.push_back(c);
    for (auto& c : idle) drop(c);
    {
      std::lock_guard lock(mu);
      closed = true;
      // Handlers still running see their client gone and finish (a generation is cancelled).
      for (int fd : open_fds) ::shutdown(fd, SHUT_RDWR);
    }
    work_pool.shutdown();
    control_pool.shutdown();
    std::lock_guard lock(mu);
    for (int fd : open_fds) ::close(fd);  // connections whose queued request never ran
    open_fds.clear();
    per_ip.clear();
    returned.clear();
  }
};

ServerCore::ServerCore(ServerCoreOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

ServerCore::~ServerCore() = default;

void ServerCore::route(std::string method, std::string pattern, Lane lane, Handler handler) {
  impl_->routes.push_back(Route{std::move(method), split_path(pattern), lane, std::move(handler)});
}

void ServerCore::set_head_check(std::function<bool(const Request&, Response&)> hook) {
  impl_->head_check = std::move(hook);
}

void ServerCore::set_after(std::function<void(const Request&, const Response&)> hook) {
  impl_->after = std::move(hook);
}

void ServerCore::set_error_filler(
    std::function<void(const Request&, Response&, const std::string&)> fill) {
  impl_->filler = std::move(fill);
}

Result<int> ServerCore::bind() {
  Impl& s = *impl_;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(s.opt.port);
  if (getaddrinfo(s.opt.host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr)
    return make_error(
        "cannot listen on {}:{}: not an address of this machine; choose another --host", s.opt.host,
        s.opt.port);
  int fd = -1;
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, kBacklog) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0)
    return make_error(
        "cannot listen on {}:{} (in use, or not an address of this machine); choose another "
        "--host/--port",
        s.opt.host, s.opt.port);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  const int bound = ss.ss_family == AF_INET6
                        ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                        : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  s.listen_fd = fd;
  s.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  s.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s.epoll_fd < 0 || s.wake_fd < 0)
    return make_error("cannot create the server's event loop: {}", std::strerror(errno));
  return bound;
}

Status ServerCore::serve() {
  if (impl_->listen_fd < 0) return make_error("serve() before a successful bind()");
  return impl_->run();
}

void ServerCore::stop() {
  impl_->stopping = true;
  if (impl_->wake_fd >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(impl_->wake_fd, &one, sizeof one);
  }
}

size_t ServerCore::buffered_body_bytes() const { return impl_->buffered_body.load(); }

size_t ServerCore::connections() const {
  std::lock_guard lock(impl_->mu);
  return impl_->open_fds.size();
}

}  // namespace tangram::http
