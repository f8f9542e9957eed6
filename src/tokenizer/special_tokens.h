// Finds special-token texts inside raw text, so they become single ids instead of being split
// by the encoder. USER_DEFINED tokens are always recognised (they are ordinary text that the
// vocabulary keeps whole); CONTROL and UNKNOWN tokens only when the caller asks to parse specials.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/text_range.h"
#include "tokenizer/vocab.h"

namespace tangram {

struct TextFragment {
  int32_t token = -1;     // a special token's id, or -1 for raw text
  std::string_view text;  // the covered part of the input
};

class SpecialTokenMatcher {
 public:
  explicit SpecialTokenMatcher(const Vocab& vocab);

  // Splits `text` left to right; at each position the longest matching special text wins.
  // Concatenating the fragments' texts gives back `text`.
  // protected_ranges (sorted by begin, not overlapping; bytes of `text`): a CONTROL or UNKNOWN
  // token that would overlap one of them is not matched even with parse_special, so inside them
  // the text splits as with parse_special=false. They mark text a client wrote (chat message
  // content), which must never forge a control token.
  std::vector<TextFragment> split(std::string_view text, bool parse_special,
                                  std::span<const TextRange> protected_ranges = {}) const;

  // The texts that only parse_special matches (CONTROL and UNKNOWN tokens), each once.
  const std::vector<std::string>& parse_special_texts() const { return parse_special_texts_; }

 private:
  struct Candidate {
    std::string text;
    int32_t id = -1;
    bool always = false;  // USER_DEFINED: matched even without parse_special
  };
  std::array<std::vector<Candidate>, 256> by_first_byte_;  // each sorted longest first
  std::vector<std::string> parse_special_texts_;
};

}  // namespace tangram
