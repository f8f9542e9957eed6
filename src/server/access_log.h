// Structured logging for the server: one logfmt line per event on stderr
// (`ts=... level=info event=request id=... status=200 ...`), filtered by level.
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

namespace tangram::server {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3, Off = 4 };

Result<LogLevel> parse_log_level(std::string_view name);

class AccessLog {
 public:
  explicit AccessLog(LogLevel level) : level_(level) {}
  bool enabled(LogLevel l) const { return l >= level_; }
  // Writes `ts=<utc> level=<l> event=<event> k=v ...`; values with spaces or quotes are quoted.
  void write(LogLevel l, std::string_view event, const std::vector<std::pair<std::string, std::string>>& fields);

 private:
  LogLevel level_;
  std::mutex mu_;
};

}  // namespace tangram::server
