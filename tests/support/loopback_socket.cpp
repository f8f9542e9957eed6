#include "support/loopback_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>

namespace tangram::testing {

int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string read_until(int fd, const std::string& until, int timeout_s) {
  timeval tv{timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  char buf[65536];
  for (ssize_t n; (until.empty() || out.find(until) == std::string::npos) &&
                  (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
    out.append(buf, static_cast<size_t>(n));
  return out;
}

std::string raw_exchange(int port, const std::string& wire, const RawExchange& how) {
  const int fd = connect_loopback(port);
  if (fd < 0) return "";
  (void)::send(fd, wire.data(), wire.size(), MSG_NOSIGNAL);
  if (how.half_close) ::shutdown(fd, SHUT_WR);
  std::string out = read_until(fd, how.until, how.timeout_s);
  ::close(fd);
  return out;
}

}  // namespace tangram::testing
