#include "tokenizer/tiktoken_vocab.h"

#include <algorithm>
#include <array>

#include "common/file_text.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/token_index.h"

namespace tangram {

namespace {

// Standard base64 (RFC 4648) with optional '=' padding; nullopt on any other character.
std::optional<std::string> decode_base64(std::string_view in) {
  std::array<int8_t, 256> value{};
  value.fill(-1);
  const std::string_view alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < alphabet.size(); ++i)
    value[static_cast<uint8_t>(alphabet[i])] = static_cast<int8_t>(i);
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const int8_t v = value[static_cast<uint8_t>(c)];
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  if (bits >= 6) return std::nullopt;  // a lone trailing character carries no whole byte
  return out;
}

struct SpecialToken {
  std::string text;
  TokenType type = TokenType::kControl;
};

std::vector<SpecialToken> llama3_specials() {
  std::vector<SpecialToken> s = {
      {"<|begin_of_text|>"},
      {"<|end_of_text|>"},
      {"<|reserved_special_token_0|>"},
      {"<|reserved_special_token_1|>"},
      {"<|finetune_right_pad_id|>"},
      {"<|reserved_special_token_2|>"},
      {"<|start_header_id|>"},
      {"<|end_header_id|>"},
      {"<|eom_id|>"},
      {"<|eot_id|>"},
      {"<|python_tag|>"},
  };
  for (int i = 3; s.size() < 256; ++i)
    s.push_back({fmt::format("<|reserved_special_token_{}|>", i)});
  return s;
}

std::vector<SpecialToken> qwen2_specials() {
  return {
      {"<|endoftext|>"},
      {"<|im_start|>"},
      {"<|im_end|>"},
      {"<|object_ref_start|>"},
      {"<|object_ref_end|>"},
      {"<|box_start|>"},
      {"<|box_end|>"},
      {"<|quad_start|>"},
      {"<|quad_end|>"},
      {"<|vision_start|>"},
      {"<|vision_end|>"},
      {"<|vision_pad|>"},
      {"<|image_pad|>"},
      {"<|video_pad|>"},
      {"<tool_call>", TokenType::kUserDefined},
      {"</tool_call>", TokenType::kUserDefined},
      {"<|fim_prefix|>"},
      {"<|fim_middle|>"},
      {"<|fim_suffix|>"},
      {"<|fim_pad|>"},
      {"<|repo_name|>"},
      {"<|file_sep|>"},
  };
}

}  // namespace

std::vector<std::string> merges_from_ranks(const std::vector<std::string>& ranked) {
  const TokenIndex rank_of(ranked);

  struct Split {
    int32_t left_rank;
    int32_t right_rank;
    size_t at;
  };
  std::vector<std::string> merges;
  std::vector<Split> splits;
  for (const std::string& token : ranked) {
    splits.clear();
    const std::string_view t(token);
    for (size_t at = 1; at < t.size(); ++at) {
      const int32_t l = rank_of.find(t.substr(0, at));
      if (l < 0) continue;
      const int32_t r = rank_of.find(t.substr(at));
      if (r >= 0) splits.push_back({l, r, at});
    }
    std::sort(splits.begin(), splits.end(), [](const Split& a, const Split& b) {
      return a.left_rank != b.left_rank ? a.left_rank < b.left_rank : a.right_rank < b.right_rank;
    });
    for (const Split& s : splits) {
      merges.push_back(bytes_to_byte_level(t.substr(0, s.at)) + " " +
                       bytes_to_byte_level(t.substr(s.at)));
    }
  }
  return merges;
}

Result<Vocab> vocab_from_tiktoken(std::string_view text, TiktokenFlavor flavor) {
  // ranked: [n] token bytes by rank
  std::vector<std::string> ranked;
  std::vector<uint8_t> seen;
  // Ranks above the line count cannot be contiguous; rejecting them early bounds the memory.
  const size_t max_lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos) return make_error("tiktoken: line {} has no rank", line_no);
    const std::optional<std::string> bytes = decode_base64(line.substr(0, sp));
    if (!bytes || bytes->empty()) return make_error("tiktoken: line {} has bad base64", line_no);
    const std::string_view rank_text = line.substr(sp + 1);
    uint64_t rank = 0;
    if (rank_text.empty() || rank_text.size() > 9)
      return make_error("tiktoken: line {} has a bad rank", line_no);
    for (char c : rank_text) {
      if (c < '0' || c > '9') return make_error("tiktoken: line {} has a bad rank", line_no);
      rank = rank * 10 + static_cast<uint64_t>(c - '0');
    }
    if (rank >= max_lines)
      return make_error("tiktoken: rank {} on line {} exceeds the line count", rank, line_no);
    if (rank >= ranked.size()) {
      ranked.resize(rank + 1);
      seen.resize(rank + 1, 0);
    }
    if (seen[rank] != 0)
      return make_error("tiktoken: rank {} appears twice (line {})", rank, line_no);
    seen[rank] = 1;
    ranked[rank] = *bytes;
  }
  if (ranked.empty()) return make_error("tiktoken: no tokens");
  for (size_t r = 0; r < seen.size(); ++r) {
    if (seen[r] == 0) return make_error("tiktoken: rank {} is missing", r);
  }

  Vocab v;
  v.model = VocabModel::kBpe;
  v.tokens.reserve(ranked.size() + 256);
  for (const std::string& t : ranked) v.tokens.push_back(bytes_to_byte_level(t));
  v.types.assign(ranked.size(), TokenType::kNormal);
  v.merges = merges_from_ranks(ranked);

  const auto base = static_cast<int32_t>(ranked.size());
  const std::vector<SpecialToken> specials =
      flavor == TiktokenFlavor::kLlama3 ? llama3_specials() : qwen2_specials();
  for (const SpecialToken& s : specials) {
    v.tokens.push_back(s.text);
    v.types.push_back(s.type);
  }
  if (flavor == TiktokenFlavor::kLlama3) {
    v.pre = "llama-bpe";
    v.bos = base + 0;  // <|begin_of_text|>
    v.eos = base + 1;  // <|end_of_text|>
    v.eom = base + 8;  // <|eom_id|>
    v.eot = base + 9;  // <|eot_id|>
    v.add_bos = true;
  } else {
    v.pre = "qwen2";
    v.bos = base + 0;  // <|endoftext|>, as Qwen2 GGUFs record it (never added)
    v.pad = base + 0;
    v.eos = base + 2;  // <|im_end|>
    v.eot = base + 2;
    v.add_bos = false;
  }
  TG_TRY(validate_vocab(v));
  return v;
}

Result<Vocab> load_tiktoken_vocab(const std::string& path, TiktokenFlavor flavor) {
  TG_ASSIGN(const std::string text, read_file_text(path, "the tiktoken vocabulary"));
  auto v = vocab_from_tiktoken(text, flavor);
  if (!v.ok()) return make_error("{} ({})", v.message(), path);
  return v;
}

}  // namespace tangram
