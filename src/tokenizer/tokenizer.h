// Text <-> token ids for the two GGUF tokenizer families: SentencePiece-style BPE ("llama") and
// byte-level BPE ("gpt2"), following llama.cpp's conventions so ids match its test vectors.
//
// Invalid UTF-8 input never fails: SPM encodes each malformed byte as its <0xNN> byte token (UNK
// when the vocabulary has none); byte-level BPE encodes malformed bytes through their byte-level
// tokens. Either way decode(encode(x)) gives x back byte for byte when the vocabulary has byte
// tokens, except that SPM decodes a literal U+2581 ("▁", its own spelling of the space) as a
// space, as SentencePiece and llama.cpp do. Ids outside the vocabulary decode to nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/text_range.h"
#include "tokenizer/token_index.h"
#include "tokenizer/vocab.h"

namespace tangram {

class GgufFile;
class SpmEncoder;
class BpeEncoder;
class SpecialTokenMatcher;

class Tokenizer {
 public:
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const GgufFile& file);
  static Result<std::unique_ptr<Tokenizer>> from_vocab(Vocab vocab);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_special: BOS / EOS around the text as the vocabulary's add_bos / add_eos flags say.
  // parse_special: control-token texts such as "<|im_start|>" become their ids; otherwise they
  // are encoded as plain text. USER_DEFINED tokens are always kept whole (llama.cpp does too).
  // protected_ranges: byte ranges of `text` in which no CONTROL or UNKNOWN token is matched
  // even with parse_special (they encode as with parse_special=false): the parts of a rendered
  // chat prompt that came from messages. No ranges gives exactly the plain encode.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special,
                              std::span<const TextRange> protected_ranges = {}) const;

  // The texts that parse_special turns into ids (CONTROL and UNKNOWN tokens), sorted, each once:
  // what a chat template's messages must not be able to spell as tokens.
  const std::vector<std::string>& parse_special_texts() const;

  // The token's raw bytes: SPM "▁" -> ' ', <0xNN> -> that byte, byte-level BPE text -> bytes;
  // control, unknown and user-defined tokens give their text. Empty for an invalid id. A piece
  // may be an incomplete UTF-8 sequence (see StreamDecoder).
  std::string token_to_piece(int32_t id) const;

  // Concatenated pieces. skip_special drops control and unknown tokens. For SPM vocabularies
  // with add_space_prefix, the space that encode() prepends (at the start and after each special
  // token) is removed again, so decode(encode(x)) == x.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const;

  int32_t n_vocab() const { return vocab_.n_tokens(); }
  int32_t bos() const { return vocab_.bos; }
  int32_t eos() const { return vocab_.eos; }
  int32_t eot() const { return vocab_.eot; }
  int32_t unk() const { return vocab_.unk; }
  int32_t pad() const { return vocab_.pad; }
  bool add_bos() const { return vocab_.add_bos; }
  bool add_eos() const { return vocab_.add_eos; }

  // End of generation: EOS, EOT, EOM, and special tokens that end a turn in common chat formats
  // (<|eot_id|>, <|eom_id|>, <|end_of_text|>, <|im_end|>, <|endoftext|>, <|end|>, <end_of_turn>).
  bool is_eog(int32_t id) const;
  // CONTROL tokens (BOS, EOS, chat markers).
  bool is_control(int32_t id) const;
  // Any token that is not ordinary text: CONTROL, UNKNOWN, USER_DEFINED or UNUSED.
  bool is_special(int32_t id) const;
  TokenType token_type(int32_t id) const;
  // The token's stored text (e.g. "▁Hello", "ĠHello", "<|im_end|>"); empty for an invalid id.
  const std::string& token_text(int32_t id) const;
  // Exact lookup of a stored token text.
  std::optional<int32_t> token_id(std::string_view text) const;

  const std::string& chat_template() const { return vocab_.chat_template; }
  const Vocab& vocab() const { return vocab_; }

 private:
  Tokenizer() = default;
  bool valid(int32_t id) const { return id >= 0 && id < vocab_.n_tokens(); }

  Vocab vocab_;
  TokenIndex index_;                 // over vocab_.tokens
  std::vector<std::string> pieces_;  // [n_tokens] decoded bytes of each token
  std::vector<uint8_t> eog_;         // [n_tokens] 1 if end of generation
  std::unique_ptr<SpecialTokenMatcher> specials_;
  std::unique_ptr<SpmEncoder> spm_;  // set for VocabModel::kSpm
  std::unique_ptr<BpeEncoder> bpe_;  // set for VocabModel::kBpe
};

}  // namespace tangram
