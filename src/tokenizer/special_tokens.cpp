#include "tokenizer/special_tokens.h"

#include <algorithm>
#include <unordered_set>

namespace tangram {

SpecialTokenMatcher::SpecialTokenMatcher(const Vocab& vocab) {
  std::unordered_set<std::string> seen;  // texts of CONTROL and UNKNOWN tokens
  for (int32_t id = 0; id < vocab.n_tokens(); ++id) {
    const TokenType type = vocab.type(id);
    const std::string& text = vocab.tokens[static_cast<size_t>(id)];
    if (text.empty()) continue;
    if (type != TokenType::kControl && type != TokenType::kUnknown &&
        type != TokenType::kUserDefined) {
      continue;
    }
    const bool always = type == TokenType::kUserDefined;
    by_first_byte_[static_cast<uint8_t>(text[0])].push_back(Candidate{text, id, always});
    if (!always) seen.insert(text);
  }
  parse_special_texts_.assign(seen.begin(), seen.end());
  std::sort(parse_special_texts_.begin(), parse_special_texts_.end());
  for (auto& bucket : by_first_byte_) {
    // Longest first; equal lengths keep id order so duplicates resolve to the lowest id.
    std::stable_sort(bucket.begin(), bucket.end(), [](const Candidate& a, const Candidate& b) {
      return a.text.size() > b.text.size();
    });
  }
}

namespace {

// The ranges clamped to `size`, empty ones dropped, sorted and merged, so that one forward pass
// can answer "does [pos, end) overlap a protected byte?".
std::vector<TextRange> normalized(std::span<const TextRange> ranges, size_t size) {
  std::vector<TextRange> out;
  for (TextRange r : ranges) {
    r.end = std::min(r.end, size);
    if (r.begin < r.end) out.push_back(r);
  }
  std::sort(out.begin(), out.end(),
            [](const TextRange& a, const TextRange& b) { return a.begin < b.begin; });
  std::vector<TextRange> merged;
  for (const TextRange& r : out) {
    if (!merged.empty() && r.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, r.end);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

}  // namespace

std::vector<TextFragment> SpecialTokenMatcher::split(
    std::string_view text, bool parse_special, std::span<const TextRange> protected_ranges) const {
  std::vector<TextFragment> out;
  const std::vector<TextRange> guarded = normalized(protected_ranges, text.size());
  size_t next_guard = 0;  // the first protected range that ends after pos
  size_t raw_start = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    while (next_guard < guarded.size() && guarded[next_guard].end <= pos) ++next_guard;
    const Candidate* hit = nullptr;
    for (const Candidate& c : by_first_byte_[static_cast<uint8_t>(text[pos])]) {
      if (!c.always && !parse_special) continue;
      if (!text.substr(pos).starts_with(c.text)) continue;
      // A control token may not take even one protected byte: that would let a message's text
      // complete a token the template started, or the other way round.
      if (!c.always && next_guard < guarded.size() &&
          guarded[next_guard].begin < pos + c.text.size())
        continue;
      hit = &c;
      break;
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
