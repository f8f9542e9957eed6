// Raw TCP to a server under test on 127.0.0.1, for the tests that need bytes a client library
// would not send (half requests, pipelining, half-closes, hostile heads).
#pragma once

#include <string>

namespace tangram::testing {

// A connected socket to 127.0.0.1:port, or -1.
int connect_loopback(int port);

// Reads from fd until the peer closes, `until` appears (when not empty), or timeout_s seconds
// pass with nothing received; returns everything read.
std::string read_until(int fd, const std::string& until = "", int timeout_s = 30);

struct RawExchange {
  std::string until;        // stop reading once this appears ("" : read until closed)
  bool half_close = false;  // shut down our sending side after the request
  int timeout_s = 30;       // longest wait for the next bytes
};

// Sends `wire` on a fresh connection and returns what came back ("" when it cannot connect).
std::string raw_exchange(int port, const std::string& wire, const RawExchange& how = {});

}  // namespace tangram::testing
