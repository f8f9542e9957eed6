// What the HTTP load generators (http_load, soak_load) share about their cpp-httplib clients.
#pragma once

#include <httplib.h>

#include <ctime>

namespace tangram {

// One timeout for connecting, reading and writing, in (fractional) seconds.
inline void set_client_timeouts(httplib::Client& c, double timeout_s) {
  const auto sec = static_cast<time_t>(timeout_s);
  const auto usec = static_cast<time_t>((timeout_s - static_cast<double>(sec)) * 1e6);
  c.set_connection_timeout(sec, usec);
  c.set_read_timeout(sec, usec);
  c.set_write_timeout(sec, usec);
}

}  // namespace tangram
