#include "grammar/grammar_constraint.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include "tokenizer/tokenizer.h"

namespace tangram {

std::shared_ptr<const TokenTexts> TokenTexts::from_tokenizer(const Tokenizer& tokenizer) {
  const int32_t n = tokenizer.n_vocab();
  std::vector<std::string> pieces(static_cast<size_t>(n));
  std::vector<Kind> kinds(static_cast<size_t>(n), Kind::Never);
  for (int32_t id = 0; id < n; ++id) {
    const auto i = static_cast<size_t>(id);
    const TokenType type = tokenizer.token_type(id);
    if (tokenizer.is_eog(id))
      kinds[i] = Kind::EndOfGeneration;
    else if (type == TokenType::kNormal || type == TokenType::kByte ||
             type == TokenType::kUserDefined)
      kinds[i] = Kind::Text;
    if (kinds[i] == Kind::Text) pieces[i] = tokenizer.token_to_piece(id);
  }
  return std::make_shared<const TokenTexts>(std::move(pieces), std::move(kinds));
}

TokenTexts::TokenTexts(std::vector<std::string> pieces, std::vector<Kind> kinds)
    : pieces_(std::move(pieces)), kinds_(std::move(kinds)) {
  kinds_.resize(pieces_.size(), Kind::Never);
  std::vector<int32_t> text_tokens;
  for (size_t i = 0; i < pieces_.size(); ++i) {
    if (kinds_[i] == Kind::Text && pieces_[i].empty()) kinds_[i] = Kind::Never;  // no progress
    if (kinds_[i] == Kind::Text) text_tokens.push_back(static_cast<int32_t>(i));
  }
  trie_ = TokenTrie(pieces_, std::move(text_tokens));
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<const OutputGrammar> grammar,
                                     std::shared_ptr<const TokenTexts> texts)
    : texts_(std::move(texts)), matcher_(std::move(grammar)) {}

std::unique_ptr<TokenConstraint> GrammarConstraint::clone() const {
  return std::make_unique<GrammarConstraint>(*this);
}

bool GrammarConstraint::allows(int32_t token) const {
  if (token < 0 || token >= texts_->n_vocab()) return false;
  switch (texts_->kind(token)) {
    case TokenTexts::Kind::EndOfGeneration:
      return matcher_.may_end();
    case TokenTexts::Kind::Never:
      return false;
    case TokenTexts::Kind::Text:
      break;
  }
  OutputMatcher trial = matcher_;
  return trial.feed(texts_->piece(token));
}

namespace {

// A walk of (part of) the trie with the matcher: marks the tokens it allows. matchers[d] is the
// matcher after the prefix of the node visited at depth d.
class MaskWalk {
 public:
  // allowed: [n] the mask to mark (ids from n on are left out).
  MaskWalk(const OutputMatcher& start, const TokenTrie& trie, std::vector<uint8_t>& allowed,
           int32_t n)
      : start_(start), trie_(trie), allowed_(allowed), n_(n), matchers_{start} {}

  // The whole trie.
  void all() { walk(1, trie_.size()); }

  // The subtree of `node`, whose prefix is `prefix`.
  void subtree(int32_t node, std::string_view prefix) {
    const size_t d = prefix.size();
    grow(d);
    matchers_[d] = start_;
    if (!matchers_[d].feed(prefix)) return;
    mark(node);
    walk(node + 1, trie_.subtree_end(node));
  }

 private:
  // Nodes [first, end): a run of whole subtrees whose parents' matchers are set.
  void walk(int32_t first, int32_t end) {
    for (int32_t node = first; node < end;) {
      const auto d = static_cast<size_t>(trie_.depth(node));
      grow(d);
      matchers_[d] = matchers_[d - 1];  // copy-assigning reuses the slot's buffers
      if (!matchers_[d].feed_byte(trie_.byte(node))) {
        node = trie_.subtree_end(node);
        continue;
      }
      mark(node);
      ++node;
    }
  }

  void grow(size_t d) {
    while (matchers_.size() <= d) matchers_.push_back(start_);
  }

  void mark(int32_t node) {
    for (int32_t id : trie_.tokens(node))
      if (id < n_) allowed_[static_cast<size_t>(id)] = 1;
  }

  const OutputMatcher& start_;
  const TokenTrie& trie_;
  std::vector<uint8_t>& allowed_;
  int32_t n_;
  std::vector<OutputMatcher> matchers_;  // [depth] grown on demand
};

// The string walk behind TokenTexts::in_string(): the trie with only a string cursor (no length
// bound), counting the characters each prefix begins.
TokenTexts::InString walk_in_string(const TokenTrie& trie, int32_t n_vocab,
                                    const OutputMatcher::StringScan& scan) {
  TokenTexts::InString out;
  out.chars.assign(static_cast<size_t>(n_vocab), TokenTexts::InString::kLeaves);
  std::vector<OutputMatcher::StringCursor> cursors(static_cast<size_t>(trie.max_depth()) +
                                                   1);  // [depth]
  std::vector<uint16_t> begun(cursors.size(), 0);       // [depth] characters begun by the prefix
  std::string prefix(cursors.size(), '\0');
  cursors[0] = OutputMatcher::StringCursor{scan, 0, -1};
  for (int32_t node = 1; node < trie.size();) {
    const auto d = static_cast<size_t>(trie.depth(node));
    prefix[d - 1] = static_cast<char>(trie.byte(node));
    cursors[d] = cursors[d - 1];
    const bool char_begins = cursors[d].scan == OutputMatcher::StringScan{};
    const OutputMatcher::Scan s = OutputMatcher::step_cursor(cursors[d], trie.byte(node));
    if (s != OutputMatcher::Scan::Char) {
      if (s == OutputMatcher::Scan::Close)
        out.closes.push_back({node, prefix.substr(0, d), begun[d - 1]});
      node = trie.subtree_end(node);
      continue;
    }
    begun[d] = static_cast<uint16_t>(begun[d - 1] + (char_begins ? 1 : 0));
    for (int32_t id : trie.tokens(node)) out.chars[static_cast<size_t>(id)] = begun[d];
    ++node;
  }
  return out;
}

}  // namespace

std::shared_ptr<const TokenTexts::InString> TokenTexts::in_string(
    const OutputMatcher::StringScan& scan) const {
  std::lock_guard<std::mutex> lock(in_string_mutex_);
  for (const auto& [key, value] : in_string_)
    if (key == scan) return value;
  auto made = std::make_shared<const InString>(walk_in_string(trie_, n_vocab(), scan));
  in_string_.emplace_back(scan, made);
  return made;
}

void GrammarConstraint::allowed_tokens(int32_t n_vocab, std::vector<uint8_t>& allowed) const {
  allowed.assign(static_cast<size_t>(std::max(n_vocab, 0)), 0);
  const int32_t n = std::min(n_vocab, texts_->n_vocab());
  MaskWalk walk(matcher_, texts_->trie(), allowed, n);
  const std::optional<OutputMatcher::StringCursor> cursor = matcher_.string_cursor();
  if (cursor && texts_->trie().max_depth() < TokenTexts::InString::kLeaves) {
    // A character may begin while fewer than max_length are written; one already begun (the
    // cursor is inside it) counts once it completes.
    const bool in_char = !(cursor->scan == OutputMatcher::StringScan{});
    const int32_t budget =
        cursor->max_length < 0 ? INT32_MAX : cursor->max_length - cursor->count - (in_char ? 1 : 0);
    // Below kLeaves, so a token that leaves the string never passes.
    const auto most =
        static_cast<uint16_t>(std::clamp<int32_t>(budget, 0, TokenTexts::InString::kLeaves - 1));
    const std::shared_ptr<const TokenTexts::InString> known = texts_->in_string(cursor->scan);
    for (int32_t id = 0; id < n; ++id)
      allowed[static_cast<size_t>(id)] = known->chars[static_cast<size_t>(id)] <= most;
    for (const TokenTexts::InString::Close& close : known->closes)
      if (close.chars <= budget) walk.subtree(close.node, close.prefix);
  } else {
    walk.all();
  }
  const bool may_end = matcher_.may_end();
  for (int32_t id = 0; id < n; ++id)
    if (texts_->kind(id) == TokenTexts::Kind::EndOfGeneration)
      allowed[static_cast<size_t>(id)] = may_end ? 1 : 0;
}

void GrammarConstraint::accept(int32_t token) {
  if (token >= 0 && token < texts_->n_vocab() && texts_->kind(token) == TokenTexts::Kind::Text)
    matcher_.feed(texts_->piece(token));
}

bool GrammarConstraint::must_end() const { return matcher_.must_end() || matcher_.dead(); }

}  // namespace tangram
