// Byte-level BPE (GPT-2 family: tokenizer.ggml.model = "gpt2"): regex pre-tokenization, each
// piece mapped to byte-level text, then pairs merged by rank (lowest first, leftmost on ties).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/token_index.h"
#include "tokenizer/vocab.h"

namespace tangram {

class BpeEncoder {
 public:
  // `index` maps token texts to ids; it must outlive the encoder.
  static Result<std::unique_ptr<BpeEncoder>> create(const Vocab& vocab, const TokenIndex& index);

  // Appends the ids of `text` (raw bytes, no special-token handling). Any byte sequence is
  // accepted; malformed UTF-8 is split off by the pre-tokenizer and encoded byte by byte.
  void encode(std::string_view text, std::vector<int32_t>& out) const;

 private:
  BpeEncoder() = default;
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  struct Merge {
    int32_t rank = 0;
    int32_t result = 0;  // id of the merged token
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  std::unique_ptr<PreTokenizer> pre_;
  const TokenIndex* index_ = nullptr;
  std::unordered_map<uint64_t, Merge> merges_;  // pair_key(left id, right id) -> merge
  std::array<int32_t, 256> byte_token_{};       // [byte] -> id of its one-character token, or -1
  int32_t unk_ = -1;
  // Llama-3 style: a piece that is itself a token is emitted whole, without merging.
  bool ignore_merges_ = false;
};

}  // namespace tangram
