#include "support/redis_server.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "support/loopback_socket.h"

namespace tangram::testing {
namespace {

bool answers_ping(int port) {
  const int fd = connect_loopback(port);
  if (fd < 0) return false;
  const char ping[] = "PING\r\n";
  char buf[16] = {};
  const bool ok = ::write(fd, ping, sizeof ping - 1) == static_cast<ssize_t>(sizeof ping - 1) &&
                  ::read(fd, buf, sizeof buf - 1) > 0 && std::strncmp(buf, "+PONG", 5) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

RedisServer::RedisServer(std::filesystem::path dir)
    : dir_(std::move(dir)), port_(free_loopback_port()) {}

RedisServer::~RedisServer() { stop(); }

bool RedisServer::start() {
  if (pid_ > 0) return true;
  const std::string port = std::to_string(port_);
  const std::string dir = dir_.string();
  const std::string log = (dir_ / "redis.log").string();
  pid_ = ::fork();
  if (pid_ == 0) {
    ::execlp("redis-server", "redis-server", "--port", port.c_str(), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", dir.c_str(), "--logfile", log.c_str(),
             static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 100; ++i) {
    if (answers_ping(port_)) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      ADD_FAILURE() << "redis-server did not start (exit "
                    << (WIFEXITED(status) ? WEXITSTATUS(status) : -1)
                    << "); install it with scripts/setup.sh --tests (Debian package redis-server)";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "redis-server on port " << port_ << " did not answer PING within 5 s; see "
                << log;
  stop();
  return false;
}

void RedisServer::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

}  // namespace tangram::testing
