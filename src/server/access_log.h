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

// A logfmt value. Bare when it is non-empty and holds only printable characters other than
// space, '"', '=' and '\'; otherwise in double quotes, with '"' and '\' backslashed, and every
// character that could break or fake a line escaped: \n \r \t, other C0 controls and DEL as
// \xHH, C1 controls and U+2028/U+2029 as \uHHHH, and each byte that is not part of valid UTF-8
// as \xHH. The result is printable UTF-8 with no line break, and the value can be recovered.
std::string logfmt_value(std::string_view v);

// `ts=<timestamp> level=<l> event=<event> k=v ...` and a '\n', the line's only control byte.
// Keys and the event are names: any byte other than [A-Za-z0-9_.-] in them becomes '_'.
std::string format_log_line(std::string_view timestamp, LogLevel l, std::string_view event,
                            const std::vector<std::pair<std::string, std::string>>& fields);

class AccessLog {
 public:
  explicit AccessLog(LogLevel level) : level_(level) {}
  bool enabled(LogLevel l) const { return l >= level_; }
  // Writes format_log_line() with the UTC time now to stderr. Whatever a client put in a field
  // (a path with %00 or %0d%0a, say) stays inside its one line.
  void write(LogLevel l, std::string_view event,
             const std::vector<std::pair<std::string, std::string>>& fields);

 private:
  LogLevel level_;
  std::mutex mu_;
};

}  // namespace tangram::server
