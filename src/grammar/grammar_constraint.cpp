#include "grammar/grammar_constraint.h"

#include <algorithm>
#include <numeric>

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
  for (size_t i = 0; i < pieces_.size(); ++i) {
    if (kinds_[i] == Kind::Text && pieces_[i].empty()) kinds_[i] = Kind::Never;  // no progress
    if (kinds_[i] == Kind::Text) by_bytes_.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(by_bytes_.begin(), by_bytes_.end(), [&](int32_t a, int32_t b) { return piece(a) < piece(b); });
  shared_prefix_.assign(by_bytes_.size(), 0);
  for (size_t k = 1; k < by_bytes_.size(); ++k) {
    const std::string& a = piece(by_bytes_[k - 1]);
    const std::string& b = piece(by_bytes_[k]);
    const auto diff = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
    shared_prefix_[k] = static_cast<int32_t>(diff.first - a.begin());
  }
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

void GrammarConstraint::allowed_tokens(int32_t n_vocab, std::vector<uint8_t>& allowed) const {
  allowed.assign(static_cast<size_t>(std::max(n_vocab, 0)), 0);
  const int32_t n = std::min(n_vocab, texts_->n_vocab());
  const bool may_end = matcher_.may_end();
  for (int32_t id = 0; id < n; ++id)
    if (texts_->kind(id) == TokenTexts::Kind::EndOfGeneration) allowed[static_cast<size_t>(id)] = may_end ? 1 : 0;
  // states[d]: the matcher after the first d bytes of the current token (valid up to the
  // token's length, or to where it died). Copy-assigning into a kept slot reuses its buffers.
  std::vector<OutputMatcher> states{matcher_};
  size_t dead_at = SIZE_MAX;  // the depth at which the current prefix died (SIZE_MAX: alive)
  const std::vector<int32_t>& order = texts_->by_bytes();
  for (size_t k = 0; k < order.size(); ++k) {
    const int32_t id = order[k];
    const std::string& piece = texts_->piece(id);
    const auto shared = static_cast<size_t>(texts_->shared_prefix()[k]);
    if (dead_at <= shared) continue;  // a prefix already refused: so is this token
    dead_at = SIZE_MAX;
    for (size_t d = shared; d < piece.size(); ++d) {
      if (states.size() <= d + 1) states.push_back(states[d]);
      else states[d + 1] = states[d];
      if (!states[d + 1].feed_byte(static_cast<uint8_t>(piece[d]))) {
        dead_at = d + 1;
        break;
      }
    }
    if (dead_at == SIZE_MAX && id < n) allowed[static_cast<size_t>(id)] = 1;
  }
}

void GrammarConstraint::accept(int32_t token) {
  if (token >= 0 && token < texts_->n_vocab() && texts_->kind(token) == TokenTexts::Kind::Text)
    matcher_.feed(texts_->piece(token));
}

bool GrammarConstraint::must_end() const { return matcher_.must_end() || matcher_.dead(); }

}  // namespace tangram
