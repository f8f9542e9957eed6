#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace tangram {

namespace {

// Printable Latin-1 bytes keep their own code point; the other 68 bytes are numbered from U+0100
// in byte order (the GPT-2 convention).
bool keeps_own_codepoint(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteTables {
  std::array<uint32_t, 256> to_cp{};   // [byte] -> code point
  std::array<int16_t, 324> to_byte{};  // [code point < 324] -> byte, or -1
  ByteTables() {
    to_byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = keeps_own_codepoint(b) ? static_cast<uint32_t>(b) : next++;
      to_cp[static_cast<size_t>(b)] = cp;
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& tables() {
  static const ByteTables t;
  return t;
}

}  // namespace

uint32_t byte_to_codepoint(uint8_t byte) { return tables().to_cp[byte]; }

std::optional<uint8_t> codepoint_to_byte(uint32_t cp) {
  if (cp >= tables().to_byte.size()) return std::nullopt;
  const int16_t b = tables().to_byte[cp];
  if (b < 0) return std::nullopt;
  return static_cast<uint8_t>(b);
}

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) utf8_append(out, byte_to_codepoint(static_cast<uint8_t>(c)));
  return out;
}

std::string byte_level_to_bytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = utf8_decode(text, pos);
    if (c.status == Utf8Status::kComplete) {
      if (auto b = codepoint_to_byte(c.codepoint)) {
        out += static_cast<char>(*b);
      } else {
        out.append(text.substr(pos, c.length));
      }
      pos += c.length;
    } else {
      out += text[pos];
      pos += 1;
    }
  }
  return out;
}

}  // namespace tangram
