#include "server/access_log.h"

#include <chrono>
#include <cstdio>
#include <ctime>

#include <fmt/format.h>

namespace tangram::server {
namespace {

constexpr std::string_view kLevelNames[] = {"debug", "info", "warn", "error", "off"};

std::string quote_if_needed(const std::string& v) {
  bool plain = !v.empty();
  for (char c : v) plain = plain && c != ' ' && c != '"' && c != '=' && c != '\n' && c != '\\';
  if (plain) return v;
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out + "\"";
}

}  // namespace

Result<LogLevel> parse_log_level(std::string_view name) {
  for (int i = 0; i < 5; ++i)
    if (name == kLevelNames[i]) return static_cast<LogLevel>(i);
  return make_error("unknown log level '{}': use debug, info, warn, error or off", name);
}

void AccessLog::write(LogLevel l, std::string_view event, const std::vector<std::pair<std::string, std::string>>& fields) {
  if (!enabled(l)) return;
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::string line = fmt::format("ts={:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z level={} event={}", tm.tm_year + 1900,
                                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms,
                                 kLevelNames[static_cast<int>(l)], event);
  for (const auto& [k, v] : fields) line += fmt::format(" {}={}", k, quote_if_needed(v));
  line += '\n';
  std::lock_guard lock(mu_);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace tangram::server
