// UTF-8 helpers shared by the encoders and decoders. All functions are total: malformed input is
// reported through the return value, never by reading past the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tangram {

enum class Utf8Status {
  kComplete,    // a full, well-formed sequence
  kIncomplete,  // a well-formed prefix cut off by the end of the input
  kInvalid,     // the byte at `pos` cannot start a well-formed sequence here
};

struct Utf8Char {
  Utf8Status status = Utf8Status::kInvalid;
  uint32_t codepoint = 0;  // valid only for kComplete
  size_t length =
      1;  // bytes consumed: the sequence (kComplete), bytes present (kIncomplete), 1 (kInvalid)
};

// Decodes the sequence starting at s[pos] (pos < s.size()). Rejects overlong forms, surrogates
// and code points above U+10FFFF, as RFC 3629 requires.
Utf8Char utf8_decode(std::string_view s, size_t pos);

// Appends the UTF-8 encoding of `cp` (cp <= 0x10FFFF, not a surrogate; others become U+FFFD).
void utf8_append(std::string& out, uint32_t cp);

bool utf8_is_valid(std::string_view s);

// The replacement character U+FFFD, encoded.
inline constexpr std::string_view kUtf8Replacement = "\xEF\xBF\xBD";

}  // namespace tangram
