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

// A walk of (part of) the trie from a matcher: marks the tokens it allows. The state after the
// prefix of the node visited at depth d is levels[d]: while the prefix stays inside the string
// the output is in, only the string's cursor; otherwise the whole matcher in matchers[d].
class MaskWalk {
 public:
  // allowed: [n] the mask to mark (ids from n on are left out).
  MaskWalk(const OutputMatcher& start, const TokenTrie& trie, std::vector<uint8_t>& allowed, int32_t n)
      : start_(start), trie_(trie), allowed_(allowed), n_(n), levels_(static_cast<size_t>(trie.max_depth()) + 1),
        prefix_(levels_.size()), matchers_{start} {}

  // The whole trie.
  void all() {
    if (std::optional<OutputMatcher::StringCursor> cursor = start_.string_cursor()) levels_[0] = Level{true, *cursor};
    walk(1, trie_.size());
  }

  // The subtree of `node`, whose prefix is `prefix`, walked with whole matchers.
  void subtree(int32_t node, std::string_view prefix) {
    const size_t d = prefix.size();
    std::copy(prefix.begin(), prefix.end(), prefix_.begin());
    levels_[d].in_string = false;
    if (!matcher_at(d, /*from_start=*/true)) return;
    mark(node);
    walk(node + 1, trie_.subtree_end(node));
  }

  // Without a matcher: the tokens that stay inside a string from `scan` (no length bound), and
  // the nodes where a byte closes it.
  static TokenTexts::InString in_string(const TokenTrie& trie, int32_t n_vocab, const OutputMatcher::StringScan& scan) {
    TokenTexts::InString out;
    out.inside.assign(static_cast<size_t>(n_vocab), 0);
    std::vector<OutputMatcher::StringCursor> cursors(static_cast<size_t>(trie.max_depth()) + 1);  // [depth]
    std::string prefix(cursors.size(), '\0');
    cursors[0] = OutputMatcher::StringCursor{scan, 0, -1};
    for (int32_t node = 1; node < trie.size();) {
      const auto d = static_cast<size_t>(trie.depth(node));
      prefix[d - 1] = static_cast<char>(trie.byte(node));
      cursors[d] = cursors[d - 1];
      const OutputMatcher::Scan s = OutputMatcher::step_cursor(cursors[d], trie.byte(node));
      if (s != OutputMatcher::Scan::Char) {
        if (s == OutputMatcher::Scan::Close) out.closes.push_back({node, prefix.substr(0, d)});
        node = trie.subtree_end(node);
        continue;
      }
      for (int32_t id : trie.tokens(node)) out.inside[static_cast<size_t>(id)] = 1;
      ++node;
    }
    return out;
  }

 private:
  struct Level {
    bool in_string = false;
    OutputMatcher::StringCursor cursor;
  };

  // Nodes [first, end): a run of whole subtrees whose parents' levels are set.
  void walk(int32_t first, int32_t end) {
    for (int32_t node = first; node < end;) {
      const auto d = static_cast<size_t>(trie_.depth(node));
      const uint8_t c = trie_.byte(node);
      prefix_[d - 1] = static_cast<char>(c);
      bool alive = false;
      levels_[d].in_string = false;
      if (levels_[d - 1].in_string) {
        levels_[d].cursor = levels_[d - 1].cursor;
        const OutputMatcher::Scan s = OutputMatcher::step_cursor(levels_[d].cursor, c);
        levels_[d].in_string = s == OutputMatcher::Scan::Char;
        alive = levels_[d].in_string || (s == OutputMatcher::Scan::Close && matcher_at(d, /*from_start=*/true));
      } else {
        alive = matcher_at(d, /*from_start=*/false);
      }
      if (!alive) {
        node = trie_.subtree_end(node);
        continue;
      }
      mark(node);
      ++node;
    }
  }

  void mark(int32_t node) {
    for (int32_t id : trie_.tokens(node))
      if (id < n_) allowed_[static_cast<size_t>(id)] = 1;
  }

  // The matcher after the first d bytes of the prefix, from the one after d - 1 or rebuilt from
  // the start (where the level above kept only a cursor); false when the grammar refuses them.
  bool matcher_at(size_t d, bool from_start) {
    while (matchers_.size() <= d) matchers_.push_back(start_);  // copy-assigning later reuses buffers
    if (from_start) {
      matchers_[d] = start_;
      return matchers_[d].feed(std::string_view(prefix_.data(), d));
    }
    matchers_[d] = matchers_[d - 1];
    return matchers_[d].feed_byte(static_cast<uint8_t>(prefix_[d - 1]));
  }

  const OutputMatcher& start_;
  const TokenTrie& trie_;
  std::vector<uint8_t>& allowed_;
  int32_t n_;
  std::vector<Level> levels_;            // [depth]
  std::vector<char> prefix_;             // [depth] the visited node's prefix
  std::vector<OutputMatcher> matchers_;  // [depth] grown on demand
};

}  // namespace

std::shared_ptr<const TokenTexts::InString> TokenTexts::in_string(const OutputMatcher::StringScan& scan) const {
  std::lock_guard<std::mutex> lock(in_string_mutex_);
  for (const auto& [key, value] : in_string_)
    if (key == scan) return value;
  auto made = std::make_shared<const InString>(MaskWalk::in_string(trie_, n_vocab(), scan));
  in_string_.emplace_back(scan, made);
  return made;
}

void GrammarConstraint::allowed_tokens(int32_t n_vocab, std::vector<uint8_t>& allowed) const {
  allowed.assign(static_cast<size_t>(std::max(n_vocab, 0)), 0);
  const int32_t n = std::min(n_vocab, texts_->n_vocab());
  MaskWalk walk(matcher_, texts_->trie(), allowed, n);
  const std::optional<OutputMatcher::StringCursor> cursor = matcher_.string_cursor();
  if (cursor && cursor->max_length < 0) {
    const std::shared_ptr<const TokenTexts::InString> known = texts_->in_string(cursor->scan);
    std::copy(known->inside.begin(), known->inside.begin() + n, allowed.begin());
    for (const TokenTexts::InString::Close& close : known->closes) walk.subtree(close.node, close.prefix);
  } else {
    walk.all();
  }
  const bool may_end = matcher_.may_end();
  for (int32_t id = 0; id < n; ++id)
    if (texts_->kind(id) == TokenTexts::Kind::EndOfGeneration) allowed[static_cast<size_t>(id)] = may_end ? 1 : 0;
}

void GrammarConstraint::accept(int32_t token) {
  if (token >= 0 && token < texts_->n_vocab() && texts_->kind(token) == TokenTexts::Kind::Text)
    matcher_.feed(texts_->piece(token));
}

bool GrammarConstraint::must_end() const { return matcher_.must_end() || matcher_.dead(); }

}  // namespace tangram
