#include "tokenizer/spm_encoder.h"

#include <queue>

#include "tokenizer/utf8.h"

namespace tangram {

namespace {

// One symbol of the text; symbols form a linked list and a merge grows the left one in place.
struct Symbol {
  size_t start = 0;  // byte offset in the escaped text
  size_t len = 0;    // 0: absorbed by its left neighbour
  int prev = -1;
  int next = -1;
};

struct Bigram {
  float score = 0;
  int left = 0;
  int right = 0;
  size_t len = 0;  // byte length of the merged text, to detect stale entries
};

// Highest score first; on ties the leftmost pair.
struct BigramAfter {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score != b.score ? a.score < b.score : a.left > b.left;
  }
};

}  // namespace

SpmEncoder::SpmEncoder(const Vocab& vocab) : unk_(vocab.unk) {
  byte_token_.fill(-1);
  scores_.resize(vocab.tokens.size(), 0.0f);
  for (int32_t id = 0; id < vocab.n_tokens(); ++id) {
    const std::string& text = vocab.tokens[static_cast<size_t>(id)];
    scores_[static_cast<size_t>(id)] = vocab.score(id);
    const TokenType type = vocab.type(id);
    if (type == TokenType::kByte) {
      const int b = byte_token_value(text);
      if (b >= 0 && byte_token_[static_cast<size_t>(b)] < 0)
        byte_token_[static_cast<size_t>(b)] = id;
    } else if ((type == TokenType::kNormal || type == TokenType::kUserDefined ||
                type == TokenType::kUndefined) &&
               !text.empty()) {
      pieces_.try_emplace(text, id);
    }
  }
}

int32_t SpmEncoder::find_piece(const std::string& text) const {
  const auto it = pieces_.find(text);
  return it == pieces_.end() ? -1 : it->second;
}

void SpmEncoder::emit_symbol(std::string_view text, std::vector<int32_t>& out) const {
  const int32_t id = find_piece(std::string(text));
  if (id >= 0) {
    out.push_back(id);
    return;
  }
  for (char c : text) {
    const int32_t b = byte_token_[static_cast<uint8_t>(c)];
    if (b >= 0) {
      out.push_back(b);
    } else if (unk_ >= 0) {
      out.push_back(unk_);
    }
  }
}

void SpmEncoder::encode(std::string_view raw, std::vector<int32_t>& out) const {
  // escaped: raw with every ' ' replaced by "▁"
  std::string escaped;
  escaped.reserve(raw.size() + raw.size() / 2);
  for (char c : raw) {
    if (c == ' ') {
      escaped += kSpmSpaceMark;
    } else {
      escaped += c;
    }
  }
  if (escaped.empty()) return;

  // symbols: one per UTF-8 character (or per malformed byte)
  std::vector<Symbol> symbols;
  symbols.reserve(escaped.size());
  for (size_t pos = 0; pos < escaped.size();) {
    const Utf8Char c = utf8_decode(escaped, pos);
    const size_t len = c.status == Utf8Status::kComplete ? c.length : 1;
    const int index = static_cast<int>(symbols.size());
    symbols.push_back(Symbol{pos, len, index - 1, -1});
    if (index > 0) symbols[static_cast<size_t>(index) - 1].next = index;
    pos += len;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramAfter> queue;
  std::string scratch;
  const auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[static_cast<size_t>(left)];
    const Symbol& r = symbols[static_cast<size_t>(right)];
    scratch.assign(escaped, l.start, l.len + r.len);
    const int32_t id = find_piece(scratch);
    if (id < 0) return;
    queue.push(Bigram{scores_[static_cast<size_t>(id)], left, right, l.len + r.len});
  };
  for (size_t i = 1; i < symbols.size(); ++i)
    consider(static_cast<int>(i) - 1, static_cast<int>(i));

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<size_t>(b.left)];
    Symbol& right = symbols[static_cast<size_t>(b.right)];
    // Skip entries made stale by earlier merges.
    if (left.len == 0 || right.len == 0 || left.next != b.right || left.len + right.len != b.len) {
      continue;
    }
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = b.left;
    consider(left.prev, b.left);
    consider(b.left, left.next);
  }

  for (int i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    const Symbol& s = symbols[static_cast<size_t>(i)];
    emit_symbol(std::string_view(escaped).substr(s.start, s.len), out);
  }
}

}  // namespace tangram
