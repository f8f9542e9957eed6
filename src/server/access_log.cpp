#include "server/access_log.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iterator>

#include <fmt/format.h>

#include "tokenizer/utf8.h"

namespace tangram::server {
namespace {

constexpr std::string_view kLevelNames[] = {"debug", "info", "warn", "error", "off"};

bool is_name_byte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

std::string name(std::string_view v) {
  std::string out(v.empty() ? "_" : v);
  for (char& c : out)
    if (!is_name_byte(c)) c = '_';
  return out;
}

// Code points that end or disguise a line in a terminal or a log viewer.
bool needs_escape(uint32_t cp) {
  return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029;
}

}  // namespace

Result<LogLevel> parse_log_level(std::string_view level_name) {
  for (int i = 0; i < 5; ++i)
    if (level_name == kLevelNames[i]) return static_cast<LogLevel>(i);
  return make_error("unknown log level '{}': use debug, info, warn, error or off", level_name);
}

std::string logfmt_value(std::string_view v) {
  bool bare = !v.empty();
  for (size_t i = 0; bare && i < v.size();) {
    const char c = v[i];
    if (c == ' ' || c == '"' || c == '=' || c == '\\') bare = false;
    const Utf8Char u = utf8_decode(v, i);
    if (u.status != Utf8Status::kComplete || needs_escape(u.codepoint)) bare = false;
    i += u.status == Utf8Status::kComplete ? u.length : 1;
  }
  if (bare) return std::string(v);
  std::string out = "\"";
  for (size_t i = 0; i < v.size();) {
    const Utf8Char u = utf8_decode(v, i);
    if (u.status != Utf8Status::kComplete) {
      out += fmt::format("\\x{:02x}", static_cast<uint8_t>(v[i]));
      ++i;
      continue;
    }
    const uint32_t cp = u.codepoint;
    if (cp == '"' || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x80 && needs_escape(cp)) {
      out += fmt::format("\\x{:02x}", cp);
    } else if (needs_escape(cp)) {
      out += fmt::format("\\u{:04x}", cp);
    } else {
      out.append(v, i, u.length);
    }
    i += u.length;
  }
  return out + "\"";
}

std::string format_log_line(std::string_view timestamp, LogLevel l, std::string_view event,
                            const std::vector<std::pair<std::string, std::string>>& fields) {
  const auto level = static_cast<size_t>(l);
  std::string line =
      fmt::format("ts={} level={} event={}", logfmt_value(timestamp),
                  level < std::size(kLevelNames) ? kLevelNames[level] : "unknown", name(event));
  for (const auto& [k, v] : fields) line += fmt::format(" {}={}", name(k), logfmt_value(v));
  line += '\n';
  return line;
}

void AccessLog::write(LogLevel l, std::string_view event,
                      const std::vector<std::pair<std::string, std::string>>& fields) {
  if (!enabled(l)) return;
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  const std::string ts =
      fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  const std::string line = format_log_line(ts, l, event, fields);
  std::lock_guard lock(mu_);
  // fwrite, not fputs: the line's length, not its first NUL, says where it ends.
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace tangram::server
