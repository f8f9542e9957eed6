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
    if (tokenizer.is_eog(id)) kinds[i] = Kind::EndOfGeneration;
    else if (type == TokenType::kNormal || type == TokenType::kByte || type == TokenType::kUserDefined)
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
    case TokenTexts::Kind::EndOfGeneration: return matcher_.may_end();
    case TokenTexts::Kind::Never: return false;
    case TokenTexts::Kind::Text: break;
  }
  OutputMatcher trial = matcher_;
  return trial.feed(texts_->piece(token));
}

namespace {

// The walk's state after the prefix of the node at some depth: while the prefix stays inside the
// string the output is in, the string's cursor; otherwise a whole matcher (in the walk's slots).
struct WalkLevel {
  bool in_string = false;
  OutputMatcher::StringCursor cursor;
};

}  // namespace

void GrammarConstraint::allowed_tokens(int32_t n_vocab, std::vector<uint8_t>& allowed) const {
  allowed.assign(static_cast<size_t>(std::max(n_vocab, 0)), 0);
  const int32_t n = std::min(n_vocab, texts_->n_vocab());
  const bool may_end = matcher_.may_end();
  for (int32_t id = 0; id < n; ++id)
    if (texts_->kind(id) == TokenTexts::Kind::EndOfGeneration) allowed[static_cast<size_t>(id)] = may_end ? 1 : 0;
  const TokenTrie& trie = texts_->trie();
  const auto depths = static_cast<size_t>(trie.max_depth()) + 1;
  std::vector<WalkLevel> levels(depths);   // [depth]
  std::vector<char> prefix(depths);        // [depth] the visited node's prefix
  std::vector<OutputMatcher> matchers{matcher_};  // [depth] grown on demand; copy-assigning reuses buffers
  if (std::optional<OutputMatcher::StringCursor> cursor = matcher_.string_cursor())
    levels[0] = WalkLevel{true, *cursor};
  // The matcher after the first d bytes of the prefix, from the one after d - 1 (or rebuilt from
  // the start where the level above only kept a cursor); false when the grammar refuses them.
  const auto matcher_at = [&](size_t d, bool from_start) {
    while (matchers.size() <= d) matchers.push_back(matcher_);
    if (from_start) {
      matchers[d] = matcher_;
      return matchers[d].feed(std::string_view(prefix.data(), d));
    }
    matchers[d] = matchers[d - 1];
    return matchers[d].feed_byte(static_cast<uint8_t>(prefix[d - 1]));
  };
  for (int32_t node = 1; node < trie.size();) {
    const auto d = static_cast<size_t>(trie.depth(node));
    const uint8_t c = trie.byte(node);
    prefix[d - 1] = static_cast<char>(c);
    bool alive = false;
    levels[d].in_string = false;
    if (levels[d - 1].in_string) {
      levels[d].cursor = levels[d - 1].cursor;
      const OutputMatcher::Scan s = OutputMatcher::step_cursor(levels[d].cursor, c);
      levels[d].in_string = s == OutputMatcher::Scan::Char;
      alive = levels[d].in_string || (s == OutputMatcher::Scan::Close && matcher_at(d, /*from_start=*/true));
    } else {
      alive = matcher_at(d, /*from_start=*/false);
    }
    if (!alive) {
      node = trie.subtree_end(node);
      continue;
    }
    for (int32_t id : trie.tokens(node))
      if (id < n) allowed[static_cast<size_t>(id)] = 1;
    ++node;
  }
}

void GrammarConstraint::accept(int32_t token) {
  if (token >= 0 && token < texts_->n_vocab() && texts_->kind(token) == TokenTexts::Kind::Text)
    matcher_.feed(texts_->piece(token));
}

bool GrammarConstraint::must_end() const { return matcher_.must_end() || matcher_.dead(); }

}  // namespace tangram
