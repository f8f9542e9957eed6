// A real redis-server for one test, on a free loopback port, in the test's own directory, with
// persistence off. Stopped (SIGKILL) by stop() or the destructor; start() again reuses the port,
// which is how tests take Redis away and bring it back. A missing redis-server fails the test
// with what to install; it never skips.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

namespace tangram::testing {

class RedisServer {
 public:
  explicit RedisServer(std::filesystem::path dir);
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Starts it and waits until it answers PING (5 s at most); false (with a test failure) if not.
  bool start();
  void stop();
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  std::filesystem::path dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// A TCP port on 127.0.0.1 that was free a moment ago.
int free_loopback_port();

}  // namespace tangram::testing
