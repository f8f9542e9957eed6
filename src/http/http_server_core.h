// Tangram's HTTP/1.1 server core: sockets, limits, deadlines and worker threads; what a request
// means is the handlers' business (src/server).
//
// One reactor thread (epoll) accepts connections and reads every request completely (head and
// body, decoded and within the limits) before any worker sees it. The head is checked first
// (authentication, Host, content type): a request refused there is answered before one byte of
// its body is read, and "100 Continue" is sent only to a request the check let through. So a
// slow or stalled client
// costs a file descriptor and a buffer, never a worker. Each request must arrive whole within
// the read timeout counted from its first byte (not per read), and an idle keep-alive
// connection is closed after its own timeout. Connections are capped in total and per client
// address. Complete requests run on one of two worker pools: the "work" lane for long requests
// (generations, which may stream for minutes) and the "control" lane for everything else, so
// /health, /metrics and the like are answered even while every work thread is busy. Responses
// never honour Range, and an answer is counted and logged by the `after` hook before its first
// byte is written, so a client that reads a metric right after its answer finds it counted.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "http/http_message.h"
#include "http/request_parser.h"

namespace tangram::http {

enum class Lane { Control, Work };

struct ServerCoreOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port
  Limits limits;
  int read_timeout_s = 10;   // a whole request (head and body), from its first byte
  int write_timeout_s = 30;  // without progress while writing a response
  int keep_alive_s = 5;      // an idle connection between requests
  int keep_alive_max_requests = 100;
  int work_threads = 16;
  int control_threads = 4;
  size_t max_connections = 1024;  // also kept below the process' file descriptor limit
  size_t max_connections_per_ip = 256;
  // Request bodies held at once, over every connection (being read, or waiting for and in their
  // handlers); a request whose body would pass it gets 503 with Retry-After. 0: 32 x max_body.
  size_t max_buffered_body = 0;
};

using Handler = std::function<void(Request&, Response&)>;

class ServerCore {
 public:
  explicit ServerCore(ServerCoreOptions options);
  ~ServerCore();
  ServerCore(const ServerCore&) = delete;
  ServerCore& operator=(const ServerCore&) = delete;

  // Routes: `pattern` is a path whose segments may be ":name" (one segment, into params). A GET
  // route answers HEAD too. A path that matches with another method gets 405 and Allow.
  void route(std::string method, std::string pattern, Lane lane, Handler handler);
  // Runs on every request once its head is complete, before its body is read (on the reactor
  // thread: it must be quick and must not block); returns true when it answered (e.g. 401), and
  // the connection is then closed after the answer. `req.body` is empty here.
  void set_head_check(std::function<bool(const Request&, Response&)> hook);
  // Runs after the handler and before the response is written (counting, logging).
  void set_after(std::function<void(const Request&, const Response&)> hook);
  // Fills the body of an error response the core makes itself (404, 405, 408, 413, 431 ...):
  // `res.status` is set and `message` says why; `req` holds what was parsed (maybe nothing).
  void set_error_filler(
      std::function<void(const Request& req, Response& res, const std::string& message)> fill);

  // Binds the listening socket; returns the port.
  Result<int> bind();
  // Serves until stop(); then closes every connection and returns once every worker is done.
  Status serve();
  // Any thread (a signal handler's helper too). Connections are shut down, so handlers blocked
  // on a client see it gone.
  void stop();

  // Connections open now (for tests and metrics).
  size_t connections() const;
  // Bytes of request bodies held now (see ServerCoreOptions::max_buffered_body).
  size_t buffered_body_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tangram::http
