// Incremental detokenization for streaming output: each push() returns only text that is
// complete, well-formed UTF-8. A multi-byte character split across tokens (byte-fallback tokens,
// byte-level BPE pieces) is held back until its last byte arrives. Bytes that can never become
// well-formed are replaced by U+FFFD, so the output is always valid UTF-8.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tangram {

class Tokenizer;

class StreamDecoder {
 public:
  // `tokenizer` must outlive the decoder. skip_special drops control and unknown tokens.
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = true);

  // Appends the token's bytes and returns the newly completed text (possibly empty).
  std::string push(int32_t id);
  // Feeds raw bytes directly (what push() does with a token's piece).
  std::string push_bytes(std::string_view bytes);
  // Ends the stream: returns U+FFFD for a dangling partial sequence (or nothing) and resets.
  std::string flush();
  // Bytes currently held back (0..3).
  size_t pending() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::string pending_;  // a well-formed but incomplete UTF-8 prefix, at most 3 bytes
};

}  // namespace tangram
