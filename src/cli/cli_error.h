// How a command reports a failure: "error: <message>" on stderr and exit code 1.
#pragma once

#include <cstdio>
#include <string>

#include <fmt/format.h>

namespace tangram::cli {

inline int fail(const std::string& msg) {
  fmt::print(stderr, "error: {}\n", msg);
  return 1;
}

}  // namespace tangram::cli
