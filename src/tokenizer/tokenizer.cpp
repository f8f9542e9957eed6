#include "tokenizer/tokenizer.h"

#include <array>

#include "gguf/gguf_file.h"
#include "tokenizer/bpe_encoder.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/spm_encoder.h"

namespace tangram {

namespace {

// Special-token texts that end a turn in the chat formats we know.
constexpr std::array<std::string_view, 7> kEndOfGenerationTexts = {
    "<|eot_id|>",    "<|eom_id|>", "<|end_of_text|>", "<|im_end|>",
    "<|endoftext|>", "<|end|>",    "<end_of_turn>",
};

std::string replace_space_marks(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    if (text.substr(pos).starts_with(kSpmSpaceMark)) {
      out += ' ';
      pos += kSpmSpaceMark.size();
    } else {
      out += text[pos++];
    }
  }
  return out;
}

// The bytes a token stands for (see Tokenizer::token_to_piece).
std::string piece_of(const Vocab& v, int32_t id) {
  const std::string& text = v.tokens[static_cast<size_t>(id)];
  switch (v.type(id)) {
    case TokenType::kControl:
    case TokenType::kUnknown:
    case TokenType::kUserDefined:
      return text;  // raw text, never byte-level or "▁"-escaped
    case TokenType::kByte:
      if (const int b = byte_token_value(text); b >= 0) return std::string(1, static_cast<char>(b));
      break;  // a byte token with another text: decode it like a normal one
    case TokenType::kUndefined:
    case TokenType::kNormal:
    case TokenType::kUnused:
      break;
  }
  return v.model == VocabModel::kSpm ? replace_space_marks(text) : byte_level_to_bytes(text);
}

}  // namespace

Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const GgufFile& file) {
  TG_ASSIGN(Vocab vocab, vocab_from_gguf(file));
  return from_vocab(std::move(vocab));
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_vocab(Vocab vocab) {
  TG_TRY(validate_vocab(vocab));
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  t->vocab_ = std::move(vocab);
  const Vocab& v = t->vocab_;
  const auto n = static_cast<size_t>(v.n_tokens());

  t->index_ = TokenIndex(v.tokens);  // duplicates: the lowest id wins
  t->pieces_.resize(n);
  t->eog_.assign(n, 0);
  for (int32_t id = 0; id < v.n_tokens(); ++id) {
    const std::string& text = v.tokens[static_cast<size_t>(id)];
    t->pieces_[static_cast<size_t>(id)] = piece_of(v, id);
    const TokenType type = v.type(id);
    if (type == TokenType::kControl || type == TokenType::kUserDefined) {
      for (std::string_view eog : kEndOfGenerationTexts) {
        if (text == eog) t->eog_[static_cast<size_t>(id)] = 1;
      }
    }
  }
  for (int32_t id : {v.eos, v.eot, v.eom}) {
    if (id >= 0) t->eog_[static_cast<size_t>(id)] = 1;
  }

  t->specials_ = std::make_unique<SpecialTokenMatcher>(v);
  if (v.model == VocabModel::kSpm) {
    t->spm_ = std::make_unique<SpmEncoder>(v);
  } else {
    TG_ASSIGN(t->bpe_, BpeEncoder::create(v, t->index_));
  }
  return t;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special,
                                       std::span<const TextRange> protected_ranges) const {
  std::vector<int32_t> out;
  if (add_special && vocab_.add_bos && vocab_.bos >= 0) out.push_back(vocab_.bos);
  // SPM: the dummy-prefix space goes before the text and before text that follows a special token.
  bool after_special = true;
  std::string prefixed;
  for (const TextFragment& f : specials_->split(text, parse_special, protected_ranges)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    if (spm_) {
      if (vocab_.add_space_prefix && after_special) {
        prefixed.assign(1, ' ');
        prefixed.append(f.text);
        spm_->encode(prefixed, out);
      } else {
        spm_->encode(f.text, out);
      }
    } else {
      bpe_->encode(f.text, out);
    }
    after_special = false;
  }
  if (add_special && vocab_.add_eos && vocab_.eos >= 0) out.push_back(vocab_.eos);
  return out;
}

const std::vector<std::string>& Tokenizer::parse_special_texts() const {
  return specials_->parse_special_texts();
}

std::string Tokenizer::token_to_piece(int32_t id) const {
  return valid(id) ? pieces_[static_cast<size_t>(id)] : std::string();
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string out;
  const bool strip_prefix = spm_ != nullptr && vocab_.add_space_prefix;
  bool after_special = true;  // mirrors encode(): where a dummy-prefix space was inserted
  for (int32_t id : ids) {
    if (!valid(id)) continue;
    const TokenType type = vocab_.type(id);
    const std::string& piece = pieces_[static_cast<size_t>(id)];
    if (type == TokenType::kControl || type == TokenType::kUnknown) {
      if (!skip_special) out += piece;
      if (type == TokenType::kControl) after_special = true;
      continue;
    }
    if (type == TokenType::kUserDefined) {
      out += piece;
      after_special = true;
      continue;
    }
    if (strip_prefix && after_special && !piece.empty() && piece[0] == ' ') {
      out.append(piece, 1);
    } else {
      out += piece;
    }
    after_special = false;
  }
  return out;
}

bool Tokenizer::is_eog(int32_t id) const { return valid(id) && eog_[static_cast<size_t>(id)] != 0; }

bool Tokenizer::is_control(int32_t id) const {
  return valid(id) && vocab_.type(id) == TokenType::kControl;
}

bool Tokenizer::is_special(int32_t id) const {
  if (!valid(id)) return false;
  const TokenType t = vocab_.type(id);
  return t == TokenType::kControl || t == TokenType::kUnknown || t == TokenType::kUserDefined ||
         t == TokenType::kUnused;
}

TokenType Tokenizer::token_type(int32_t id) const {
  return valid(id) ? vocab_.type(id) : TokenType::kUndefined;
}

const std::string& Tokenizer::token_text(int32_t id) const {
  static const std::string kEmpty;
  return valid(id) ? vocab_.tokens[static_cast<size_t>(id)] : kEmpty;
}

std::optional<int32_t> Tokenizer::token_id(std::string_view text) const {
  const int32_t id = index_.find(text);
  if (id < 0) return std::nullopt;
  return id;
}

}  // namespace tangram
