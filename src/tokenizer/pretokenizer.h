// Regex pre-tokenizer for byte-level BPE: splits text into the pieces that BPE merges within.
// Patterns are compiled once with PCRE2 (UTF + UCP, so \p{L}, \p{N} and \s are Unicode-aware)
// and JIT-compiled when the platform allows.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace tangram {

class PreTokenizer {
 public:
  // `pre` is tokenizer.ggml.pre. Supported: "gpt-2"/"default"/"" (GPT-2 regex),
  // "llama-bpe"/"llama3"/"llama-v3" (Llama-3 regex, digits in groups of 1..3), "qwen2" (Llama-3
  // regex with single digits).
  static Result<std::unique_ptr<PreTokenizer>> create(std::string_view pre);
  // Compiles an arbitrary pattern (exposed for tests).
  static Result<std::unique_ptr<PreTokenizer>> from_pattern(const std::string& pattern);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Splits `text` into consecutive, non-empty pieces that concatenate back to `text`. Regex
  // matches become pieces, and so does any text between matches. Malformed UTF-8 is never given
  // to the regex: each maximal run of invalid bytes becomes a piece of its own, and the valid runs
  // around it are split independently. Thread-safe.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  PreTokenizer() = default;
  void split_valid(std::string_view text, std::vector<std::string_view>& out) const;

  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace tangram
