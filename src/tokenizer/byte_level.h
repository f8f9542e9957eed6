// GPT-2 byte-level alphabet: every byte 0..255 is shown as one printable code point, so that
// byte-level BPE vocabularies store arbitrary bytes as ordinary UTF-8 text ("Ġ" is a space).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tangram {

// The code point that stands for `byte`.
uint32_t byte_to_codepoint(uint8_t byte);
// The byte a code point stands for, or nullopt if it is not in the alphabet.
std::optional<uint8_t> codepoint_to_byte(uint32_t cp);

// Raw bytes -> byte-level text (always valid UTF-8).
std::string bytes_to_byte_level(std::string_view bytes);
// Byte-level text -> raw bytes. Code points outside the alphabet (and malformed UTF-8) are copied
// through unchanged, so text that was never byte-level encoded survives.
std::string byte_level_to_bytes(std::string_view text);

}  // namespace tangram
