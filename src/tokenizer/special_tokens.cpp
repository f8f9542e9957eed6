#include "tokenizer/special_tokens.h"

#include <algorithm>

namespace tangram {

SpecialTokenMatcher::SpecialTokenMatcher(const Vocab& vocab) {
  for (int32_t id = 0; id < vocab.n_tokens(); ++id) {
    const TokenType type = vocab.type(id);
    const std::string& text = vocab.tokens[static_cast<size_t>(id)];
    if (text.empty()) continue;
    if (type != TokenType::kControl && type != TokenType::kUnknown && type != TokenType::kUserDefined) {
      continue;
    }
    by_first_byte_[static_cast<uint8_t>(text[0])].push_back(
        Candidate{text, id, type == TokenType::kUserDefined});
  }
  for (auto& bucket : by_first_byte_) {
    // Longest first; equal lengths keep id order so duplicates resolve to the lowest id.
    std::stable_sort(bucket.begin(), bucket.end(), [](const Candidate& a, const Candidate& b) {
      return a.text.size() > b.text.size();
    });
  }
}

std::vector<TextFragment> SpecialTokenMatcher::split(std::string_view text, bool parse_special) const {
  std::vector<TextFragment> out;
  size_t raw_start = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const Candidate* hit = nullptr;
    for (const Candidate& c : by_first_byte_[static_cast<uint8_t>(text[pos])]) {
      if ((c.always || parse_special) && text.substr(pos).starts_with(c.text)) {
        hit = &c;
        break;
      }
    }
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    if (pos > raw_start) out.push_back(TextFragment{-1, text.substr(raw_start, pos - raw_start)});
    out.push_back(TextFragment{hit->id, text.substr(pos, hit->text.size())});
    pos += hit->text.size();
    raw_start = pos;
  }
  if (pos > raw_start) out.push_back(TextFragment{-1, text.substr(raw_start, pos - raw_start)});
  return out;
}

}  // namespace tangram
