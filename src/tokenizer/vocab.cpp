#include "tokenizer/vocab.h"

#include <limits>

#include "gguf/gguf_file.h"

namespace tangram {

namespace {

constexpr int32_t kMaxTokens = std::numeric_limits<int32_t>::max();

bool is_llama3_style_pre(std::string_view pre) {
  return pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3";
}

Status check_special(const Vocab& v, int32_t id, std::string_view what) {
  if (id < -1 || id >= v.n_tokens()) {
    return make_error("tokenizer: {} token id {} is outside the vocabulary of {} tokens", what, id,
                      v.n_tokens());
  }
  return {};
}

// Reads an optional special id; absent keys leave `out` unchanged. Like llama.cpp, an id outside
// the vocabulary (e.g. 0xFFFFFFFF written for "none") means there is no such token.
Status read_special(const GgufFile& f, std::string_view key, int64_t n_tokens, int32_t& out) {
  if (f.find(key) == nullptr) return {};
  const std::optional<int64_t> v = f.get_int(key);
  if (!v) return make_error("tokenizer: {} in {} is not an integer", key, f.path());
  out = *v >= 0 && *v < n_tokens ? static_cast<int32_t>(*v) : -1;
  return {};
}

Status read_flag(const GgufFile& f, std::string_view key, bool& out) {
  if (f.find(key) == nullptr) return {};
  const std::optional<bool> v = f.get_bool(key);
  if (!v) return make_error("tokenizer: {} in {} is not a bool", key, f.path());
  out = *v;
  return {};
}

int hex_digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

int byte_token_value(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  const int hi = hex_digit_value(t[3]);
  const int lo = hex_digit_value(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::string_view vocab_model_name(VocabModel m) { return m == VocabModel::kSpm ? "llama" : "gpt2"; }

Result<VocabModel> parse_vocab_model(std::string_view name) {
  if (name == "llama") return VocabModel::kSpm;
  if (name == "gpt2") return VocabModel::kBpe;
  return make_error("tokenizer: unsupported tokenizer model '{}' (supported: llama, gpt2)", name);
}

Status validate_vocab(const Vocab& v) {
  if (v.tokens.empty()) return make_error("tokenizer: the vocabulary has no tokens");
  if (v.tokens.size() > static_cast<size_t>(kMaxTokens)) {
    return make_error("tokenizer: {} tokens is too many", v.tokens.size());
  }
  if (!v.scores.empty() && v.scores.size() != v.tokens.size()) {
    return make_error("tokenizer: {} scores for {} tokens", v.scores.size(), v.tokens.size());
  }
  if (!v.types.empty() && v.types.size() != v.tokens.size()) {
    return make_error("tokenizer: {} token types for {} tokens", v.types.size(), v.tokens.size());
  }
  for (size_t i = 0; i < v.types.size(); ++i) {
    const auto t = static_cast<int32_t>(v.types[i]);
    if (t < 0 || t > static_cast<int32_t>(TokenType::kByte)) {
      return make_error("tokenizer: token {} has unknown type {}", i, t);
    }
  }
  TG_TRY(check_special(v, v.bos, "BOS"));
  TG_TRY(check_special(v, v.eos, "EOS"));
  TG_TRY(check_special(v, v.eot, "EOT"));
  TG_TRY(check_special(v, v.eom, "EOM"));
  TG_TRY(check_special(v, v.unk, "UNK"));
  TG_TRY(check_special(v, v.pad, "PAD"));
  return {};
}

void pad_vocab(Vocab& v, int32_t n_tokens) {
  if (v.types.empty()) v.types.assign(v.tokens.size(), TokenType::kNormal);
  while (v.n_tokens() < n_tokens) {
    if (!v.scores.empty()) v.scores.push_back(0.0f);
    v.types.push_back(TokenType::kUnused);
    v.tokens.push_back(fmt::format("[PAD{}]", v.n_tokens()));
  }
}

Result<Vocab> vocab_from_gguf(const GgufFile& f) {
  Vocab v;
  const std::optional<std::string> model = f.get_string("tokenizer.ggml.model");
  if (!model) return make_error("tokenizer: {} has no tokenizer.ggml.model", f.path());
  TG_ASSIGN(v.model, parse_vocab_model(*model));
  v.pre = f.get_string("tokenizer.ggml.pre").value_or("default");

  const std::vector<std::string>* tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (tokens == nullptr) {
    return make_error("tokenizer: {} has no string array tokenizer.ggml.tokens", f.path());
  }
  v.tokens = *tokens;

  if (f.find("tokenizer.ggml.scores") != nullptr) {
    const std::vector<double>* scores = f.get_float_array("tokenizer.ggml.scores");
    if (scores == nullptr)
      return make_error("tokenizer: tokenizer.ggml.scores in {} is not a float array", f.path());
    v.scores.reserve(scores->size());
    for (double s : *scores) v.scores.push_back(static_cast<float>(s));
  }
  if (f.find("tokenizer.ggml.token_type") != nullptr) {
    const std::vector<int64_t>* types = f.get_int_array("tokenizer.ggml.token_type");
    if (types == nullptr)
      return make_error("tokenizer: tokenizer.ggml.token_type in {} is not an integer array",
                        f.path());
    v.types.reserve(types->size());
    for (int64_t t : *types) {
      if (t < 0 || t > static_cast<int64_t>(TokenType::kByte)) {
        return make_error("tokenizer: {} has unknown token type {}", f.path(), t);
      }
      v.types.push_back(static_cast<TokenType>(t));
    }
  }
  if (f.find("tokenizer.ggml.merges") != nullptr) {
    const std::vector<std::string>* merges = f.get_string_array("tokenizer.ggml.merges");
    if (merges == nullptr)
      return make_error("tokenizer: tokenizer.ggml.merges in {} is not a string array", f.path());
    v.merges = *merges;
  }

  const int64_t n = static_cast<int64_t>(v.tokens.size());
  TG_TRY(read_special(f, "tokenizer.ggml.bos_token_id", n, v.bos));
  TG_TRY(read_special(f, "tokenizer.ggml.eos_token_id", n, v.eos));
  TG_TRY(read_special(f, "tokenizer.ggml.eot_token_id", n, v.eot));
  TG_TRY(read_special(f, "tokenizer.ggml.eom_token_id", n, v.eom));
  TG_TRY(read_special(f, "tokenizer.ggml.unknown_token_id", n, v.unk));
  TG_TRY(read_special(f, "tokenizer.ggml.padding_token_id", n, v.pad));

  v.add_bos = v.model == VocabModel::kSpm || is_llama3_style_pre(v.pre);
  v.add_eos = false;
  v.add_space_prefix = v.model == VocabModel::kSpm;
  TG_TRY(read_flag(f, "tokenizer.ggml.add_bos_token", v.add_bos));
  TG_TRY(read_flag(f, "tokenizer.ggml.add_eos_token", v.add_eos));
  TG_TRY(read_flag(f, "tokenizer.ggml.add_space_prefix", v.add_space_prefix));
  v.chat_template = f.get_string("tokenizer.chat_template").value_or("");

  if (Status s = validate_vocab(v); !s.ok()) {
    return make_error("{} ({})", s.message(), f.path());
  }
  return v;
}

void vocab_to_gguf(const Vocab& v, GgufWriter& w) {
  w.set_string("tokenizer.ggml.model", std::string(vocab_model_name(v.model)));
  w.set_string("tokenizer.ggml.pre", v.pre);
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  if (!v.scores.empty()) w.set_f32_array("tokenizer.ggml.scores", v.scores);
  std::vector<int32_t> types(v.tokens.size(), static_cast<int32_t>(TokenType::kNormal));
  for (size_t i = 0; i < v.types.size() && i < types.size(); ++i)
    types[i] = static_cast<int32_t>(v.types[i]);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  if (!v.merges.empty()) w.set_string_array("tokenizer.ggml.merges", v.merges);
  const auto put_id = [&w](const char* key, int32_t id) {
    if (id >= 0) w.set_u32(key, static_cast<uint32_t>(id));
  };
  put_id("tokenizer.ggml.bos_token_id", v.bos);
  put_id("tokenizer.ggml.eos_token_id", v.eos);
  put_id("tokenizer.ggml.eot_token_id", v.eot);
  put_id("tokenizer.ggml.eom_token_id", v.eom);
  put_id("tokenizer.ggml.unknown_token_id", v.unk);
  put_id("tokenizer.ggml.padding_token_id", v.pad);
  w.set_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  w.set_bool("tokenizer.ggml.add_eos_token", v.add_eos);
  w.set_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  if (!v.chat_template.empty()) w.set_string("tokenizer.chat_template", v.chat_template);
}

}  // namespace tangram
