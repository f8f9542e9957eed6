#include "tokenizer/bpe_encoder.h"

#include <queue>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace tangram {

namespace {

// One symbol of the word being merged; symbols form a doubly linked list in text order.
struct Symbol {
  int32_t id = -1;  // -1: a byte with no token of its own
  int prev = -1;
  int next = -1;
  bool alive = true;
};

struct Candidate {
  int32_t rank = 0;
  int left = 0;
  int right = 0;
  int32_t left_id = 0;
  int32_t right_id = 0;
  int32_t result = 0;
};

// Lowest rank first; on equal ranks the leftmost pair.
struct CandidateAfter {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  }
};

}  // namespace

Result<std::unique_ptr<BpeEncoder>> BpeEncoder::create(const Vocab& vocab,
                                                       const TokenIndex& index) {
  std::unique_ptr<BpeEncoder> e(new BpeEncoder());
  TG_ASSIGN(e->pre_, PreTokenizer::create(vocab.pre));
  e->index_ = &index;
  e->unk_ = vocab.unk;
  e->ignore_merges_ = vocab.pre == "llama-bpe" || vocab.pre == "llama3" || vocab.pre == "llama-v3";
  for (int b = 0; b < 256; ++b) {
    std::string text;
    utf8_append(text, byte_to_codepoint(static_cast<uint8_t>(b)));
    e->byte_token_[static_cast<size_t>(b)] = index.find(text);
  }
  e->merges_.reserve(vocab.merges.size());
  std::string joined;
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string_view m = vocab.merges[rank];
    // Split at the first space after the first byte, so a left part may itself start with one.
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos) {
      return make_error("tokenizer: merge {} ('{}') is not of the form 'left right'", rank, m);
    }
    const std::string_view left = m.substr(0, sp);
    const std::string_view right = m.substr(sp + 1);
    joined.assign(left);
    joined.append(right);
    const int32_t l = index.find(left);
    const int32_t r = index.find(right);
    const int32_t res = index.find(joined);
    // Merges whose parts or result are not tokens can never apply; HF skips them as well.
    if (l < 0 || r < 0 || res < 0) continue;
    e->merges_.try_emplace(pair_key(l, r), Merge{static_cast<int32_t>(rank), res});
  }
  return e;
}

void BpeEncoder::encode(std::string_view text, std::vector<int32_t>& out) const {
  for (std::string_view piece : pre_->split(text)) encode_piece(piece, out);
}

void BpeEncoder::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    const int32_t whole = index_->find(bytes_to_byte_level(piece));
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }
  // symbols: [piece.size()], one per byte to start with
  std::vector<Symbol> symbols(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) {
    symbols[i].id = byte_token_[static_cast<uint8_t>(piece[i])];
    symbols[i].prev = static_cast<int>(i) - 1;
    symbols[i].next = i + 1 < piece.size() ? static_cast<int>(i) + 1 : -1;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, CandidateAfter> queue;
  const auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const int32_t l = symbols[static_cast<size_t>(left)].id;
    const int32_t r = symbols[static_cast<size_t>(right)].id;
    if (l < 0 || r < 0) return;
    const auto it = merges_.find(pair_key(l, r));
    if (it == merges_.end()) return;
    queue.push(Candidate{it->second.rank, left, right, l, r, it->second.result});
  };
  for (size_t i = 0; i + 1 < piece.size(); ++i)
    consider(static_cast<int>(i), static_cast<int>(i) + 1);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<size_t>(c.left)];
    Symbol& right = symbols[static_cast<size_t>(c.right)];
    // Skip candidates made stale by earlier merges.
    if (!left.alive || !right.alive || left.next != c.right || left.id != c.left_id ||
        right.id != c.right_id) {
      continue;
    }
    left.id = c.result;
    left.next = right.next;
    right.alive = false;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = c.left;
    consider(left.prev, c.left);
    consider(c.left, left.next);
  }
  for (int i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    const int32_t id = symbols[static_cast<size_t>(i)].id;
    if (id >= 0) {
      out.push_back(id);
    } else if (unk_ >= 0) {
      out.push_back(unk_);
    }
  }
}

}  // namespace tangram
