// SentencePiece-style BPE (tokenizer.ggml.model = "llama"): spaces become "▁", the text is split
// into UTF-8 characters, and adjacent symbols whose concatenation is a token are merged, highest
// score first (leftmost on ties). Symbols that are not tokens fall back to <0xNN> byte tokens.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace tangram {

// U+2581 "▁", which SentencePiece vocabularies store in place of a space.
inline constexpr std::string_view kSpmSpaceMark = "\xE2\x96\x81";

class SpmEncoder {
 public:
  explicit SpmEncoder(const Vocab& vocab);

  // Appends the ids of `text`. The caller adds the dummy-prefix space. Malformed UTF-8 bytes are
  // single symbols that end up as byte tokens (or UNK when the vocabulary has no byte tokens).
  void encode(std::string_view text, std::vector<int32_t>& out) const;

 private:
  int32_t find_piece(const std::string& text) const;
  void emit_symbol(std::string_view text, std::vector<int32_t>& out) const;

  // Only NORMAL and USER_DEFINED tokens take part in merging, as in SentencePiece; control,
  // byte, unknown and unused tokens are never produced by a merge.
  std::unordered_map<std::string, int32_t> pieces_;
  std::vector<float> scores_;              // [n_tokens]
  std::array<int32_t, 256> byte_token_{};  // [byte] -> id of "<0xNN>", or -1
  int32_t unk_ = -1;
};

}  // namespace tangram
