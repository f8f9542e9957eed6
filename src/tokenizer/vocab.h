// A tokenizer vocabulary as GGUF stores it (keys tokenizer.ggml.*): token texts, scores, types,
// BPE merges and the special ids. Loaded from a GgufFile, built from SentencePiece or tiktoken
// files, and written back to a GgufWriter so generated models can embed it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace tangram {

class GgufFile;
class GgufWriter;

// Token types, numbered as GGUF (and SentencePiece) store them.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// tokenizer.ggml.model: "llama" is SentencePiece-style BPE over scores (SPM); "gpt2" is
// byte-level BPE over ranked merges.
enum class VocabModel { kSpm, kBpe };

std::string_view vocab_model_name(VocabModel m);  // "llama" / "gpt2"
Result<VocabModel> parse_vocab_model(std::string_view name);

struct Vocab {
  VocabModel model = VocabModel::kSpm;
  // tokenizer.ggml.pre: the BPE pre-tokenizer ("gpt-2", "llama-bpe", "qwen2", "default", ...).
  std::string pre = "default";
  std::vector<std::string> tokens;  // [n_tokens] texts (byte-level encoded for kBpe)
  std::vector<float> scores;        // [n_tokens] SPM merge priorities, or empty (all 0)
  std::vector<TokenType> types;     // [n_tokens], or empty (all kNormal)
  std::vector<std::string> merges;  // [n_merges] "left right", best (rank 0) first; kBpe only
  int32_t bos = -1;                 // -1: none
  int32_t eos = -1;
  int32_t eot = -1;
  int32_t eom = -1;
  int32_t unk = -1;
  int32_t pad = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // SPM: prepend "▁" to text at the start / after a special token
  std::string chat_template;      // Jinja text, or empty

  int32_t n_tokens() const { return static_cast<int32_t>(tokens.size()); }
  TokenType type(int32_t id) const {
    return types.empty() ? TokenType::kNormal : types[static_cast<size_t>(id)];
  }
  float score(int32_t id) const { return scores.empty() ? 0.0f : scores[static_cast<size_t>(id)]; }
};

// The byte a byte-fallback token text "<0xNN>" stands for, or -1 for any other text.
int byte_token_value(std::string_view text);

// Checks array sizes, token types and special ids (each in range or -1).
Status validate_vocab(const Vocab& vocab);

// Appends UNUSED placeholder tokens "[PAD<id>]" until the vocabulary has `n_tokens` entries (a
// model's embedding often has more rows than its tokenizer has tokens). No-op if already that big.
void pad_vocab(Vocab& vocab, int32_t n_tokens);

// Reads tokenizer.ggml.* from a GGUF. Missing optional keys take llama.cpp's defaults
// (add_bos: true for SPM and Llama-3 BPE; add_space_prefix: true for SPM).
Result<Vocab> vocab_from_gguf(const GgufFile& file);

// Writes every tokenizer.ggml.* key that vocab_from_gguf reads.
void vocab_to_gguf(const Vocab& vocab, GgufWriter& writer);

}  // namespace tangram
