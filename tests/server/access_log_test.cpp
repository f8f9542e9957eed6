// The access log keeps every field inside its one line: whatever bytes a client sends (a path
// with %00 or %0d%0a, invalid UTF-8, C1 controls), the line has no control byte but its final
// '\n', is valid UTF-8, and the value can be read back exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>

#include "server/access_log.h"
#include "tokenizer/utf8.h"

namespace tangram::server {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Reads a logfmt value back (the inverse of logfmt_value); nullopt if it is malformed.
std::optional<std::string> unescape(const std::string& v) {
  if (v.empty() || v.front() != '"') return v;
  if (v.size() < 2 || v.back() != '"') return std::nullopt;
  std::string out;
  for (size_t i = 1; i + 1 < v.size(); ++i) {
    if (v[i] == '"') return std::nullopt;  // an unescaped quote inside
    if (v[i] != '\\') {
      out += v[i];
      continue;
    }
    if (++i + 1 >= v.size()) return std::nullopt;
    const char e = v[i];
    if (e == '"' || e == '\\') {
      out += e;
    } else if (e == 'n' || e == 'r' || e == 't') {
      out += e == 'n' ? '\n' : (e == 'r' ? '\r' : '\t');
    } else if (e == 'x' || e == 'u') {
      const size_t digits = e == 'x' ? 2 : 4;
      if (i + digits >= v.size() - 1) return std::nullopt;  // the digits run into the closing quote
      uint32_t value = 0;
      for (size_t k = 1; k <= digits; ++k) {
        const int d = hex_digit(v[i + k]);
        if (d < 0) return std::nullopt;
        value = value * 16 + static_cast<uint32_t>(d);
      }
      i += digits;
      if (e == 'x') {
        out += static_cast<char>(value);
      } else {
        utf8_append(out, value);
      }
    } else {
      return std::nullopt;
    }
  }
  return out;
}

// What a log line must never contain besides its final newline.
void expect_printable(const std::string& logged) {
  for (char c : logged) {
    const auto b = static_cast<uint8_t>(c);
    EXPECT_TRUE(b >= 0x20 && b != 0x7F) << "control byte " << static_cast<int>(b);
  }
  EXPECT_TRUE(utf8_is_valid(logged));
  for (size_t i = 0; i < logged.size();) {
    const Utf8Char u = utf8_decode(logged, i);
    ASSERT_EQ(u.status, Utf8Status::kComplete);
    EXPECT_FALSE(u.codepoint >= 0x80 && u.codepoint <= 0x9F) << "C1 control";
    EXPECT_FALSE(u.codepoint == 0x2028 || u.codepoint == 0x2029) << "line separator";
    i += u.length;
  }
}

void expect_safe(const std::string& logged, const std::string& value) {
  SCOPED_TRACE(::testing::PrintToString(value));
  expect_printable(logged);
  // No space outside quotes: the value is one logfmt token.
  if (!logged.empty() && logged.front() != '"') {
    EXPECT_EQ(logged.find_first_of(" \"=\\"), std::string::npos);
  }
  EXPECT_EQ(unescape(logged), value);
}

TEST(AccessLogEscape, EveryByteAloneAndInText) {
  for (int b = 0; b < 256; ++b) {
    const std::string byte(1, static_cast<char>(b));
    expect_safe(logfmt_value(byte), byte);
    expect_safe(logfmt_value("a" + byte + "b"), "a" + byte + "b");
    expect_safe(logfmt_value(byte + byte + byte), byte + byte + byte);
  }
}

// Every two-byte sequence covers the C1 controls (C2 80..C2 9F), other valid two-byte
// characters, truncated sequences and stray continuation bytes.
TEST(AccessLogEscape, EveryPairOfBytes) {
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) {
      const std::string v = {static_cast<char>(a), static_cast<char>(b)};
      expect_safe(logfmt_value(v), v);
    }
  }
}

TEST(AccessLogEscape, KnownForms) {
  EXPECT_EQ(logfmt_value("/v1/models"), "/v1/models");
  EXPECT_EQ(logfmt_value("caf\xC3\xA9"), "caf\xC3\xA9");  // printable UTF-8 stays bare
  EXPECT_EQ(logfmt_value(""), "\"\"");
  EXPECT_EQ(logfmt_value("a b"), "\"a b\"");
  EXPECT_EQ(logfmt_value(std::string("/\0", 2)), "\"/\\x00\"");
  EXPECT_EQ(logfmt_value("/\r\nX-Injected: 1"), "\"/\\r\\nX-Injected: 1\"");
  EXPECT_EQ(logfmt_value("say \"hi\"\\"), "\"say \\\"hi\\\"\\\\\"");
  EXPECT_EQ(logfmt_value("\x1B[31m"), "\"\\x1b[31m\"");  // terminal escape
  EXPECT_EQ(logfmt_value("\x7F"), "\"\\x7f\"");
  EXPECT_EQ(logfmt_value("\xC2\x85"), "\"\\u0085\"");  // NEL
  EXPECT_EQ(logfmt_value("\xE2\x80\xA8"), "\"\\u2028\"");
  EXPECT_EQ(logfmt_value("\xFF"), "\"\\xff\"");
  EXPECT_EQ(logfmt_value("\xC3"), "\"\\xc3\"");  // truncated sequence
}

TEST(AccessLogLine, OneLineWhateverTheFields) {
  for (int b = 0; b < 256; ++b) {
    const std::string byte(1, static_cast<char>(b));
    const std::string line =
        format_log_line("2025-01-01T00:00:00.000Z", LogLevel::Info, "http" + byte,
                        {{"path", "/" + byte}, {"k" + byte, byte}});
    ASSERT_FALSE(line.empty());
    EXPECT_EQ(line.back(), '\n');
    const std::string body = line.substr(0, line.size() - 1);
    expect_printable(body);
    // Exactly the five key=value pairs, separated by single spaces outside quotes.
    size_t separators = 0;
    bool quoted = false;
    for (size_t i = 0; i < body.size(); ++i) {
      if (body[i] == '\\' && quoted) {
        ++i;
      } else if (body[i] == '"') {
        quoted = !quoted;
      } else if (body[i] == ' ' && !quoted) {
        ++separators;
      }
    }
    EXPECT_FALSE(quoted) << b;
    EXPECT_EQ(separators, 4u) << b;
  }
}

// What the probe sent: GET /%00 lost the line's newline (fputs stopped at the NUL) and
// GET /%0d%0aX-Injected:%201 wrote a raw CR. The written line is whole either way.
TEST(AccessLogWrite, NulAndCrlfStayInsideTheLine) {
  AccessLog log(LogLevel::Debug);
  for (const std::string& path : {std::string("/\0", 2), std::string("/\r\nX-Injected: 1")}) {
    ::testing::internal::CaptureStderr();
    log.write(LogLevel::Info, "http", {{"method", "GET"}, {"path", path}, {"status", "404"}});
    const std::string out = ::testing::internal::GetCapturedStderr();
    ASSERT_FALSE(out.empty());
    EXPECT_EQ(out.back(), '\n');
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);
    EXPECT_EQ(out.find('\r'), std::string::npos);
    EXPECT_EQ(out.find('\0'), std::string::npos);
    EXPECT_NE(out.find(" status=404\n"), std::string::npos)
        << out;  // nothing after the path was lost
  }
}

}  // namespace
}  // namespace tangram::server
