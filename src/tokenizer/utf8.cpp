#include "tokenizer/utf8.h"

namespace tangram {

namespace {

bool is_continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

}  // namespace

Utf8Char utf8_decode(std::string_view s, size_t pos) {
  Utf8Char r;
  if (pos >= s.size()) return r;
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) {
    r.status = Utf8Status::kComplete;
    r.codepoint = b0;
    return r;
  }
  size_t need = 0;
  uint32_t cp = 0;
  // The second byte's allowed range excludes overlongs (E0, F0), surrogates (ED) and > U+10FFFF
  // (F4).
  uint8_t lo = 0x80;
  uint8_t hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
    cp = b0 & 0x1Fu;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    cp = b0 & 0x0Fu;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    cp = b0 & 0x07u;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return r;  // continuation byte, C0/C1 or F5..FF
  }
  size_t i = 1;
  for (; i <= need; ++i) {
    if (pos + i >= s.size()) {
      r.status = Utf8Status::kIncomplete;
      r.length = i;
      return r;
    }
    const auto b = static_cast<uint8_t>(s[pos + i]);
    if (i == 1 ? (b < lo || b > hi) : !is_continuation(b)) return r;
    cp = (cp << 6) | (b & 0x3Fu);
  }
  r.status = Utf8Status::kComplete;
  r.codepoint = cp;
  r.length = need + 1;
  return r;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    out += kUtf8Replacement;
  } else if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool utf8_is_valid(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const Utf8Char c = utf8_decode(s, pos);
    if (c.status != Utf8Status::kComplete) return false;
    pos += c.length;
  }
  return true;
}

}  // namespace tangram
