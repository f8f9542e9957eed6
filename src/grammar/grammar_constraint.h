// Constrained decoding for one request: an OutputMatcher judged token by token, through the
// scheduler's TokenConstraint seam.
//
// A token is allowed when its bytes, fed to a copy of the matcher, leave it alive; an
// end-of-generation token when the output may end; control, unknown and unused tokens (and
// tokens with no bytes) never, as they are no part of the output's text. allowed_tokens() walks
// the vocabulary's prefix tree (token_trie.h) with the matcher, each distinct prefix judged once
// and a refused prefix's subtree skipped. Inside a JSON string (where nearly every token is
// allowed) it looks up which tokens stay in the string and how many characters each writes
// (TokenTexts::in_string: the same at every step for the same scanner state) and walks only the
// subtrees after a closing quote.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "grammar/output_matcher.h"
#include "grammar/token_trie.h"
#include "runtime/token_constraint.h"

namespace tangram {

class Tokenizer;

// Each token's bytes as the output receives them, and its kind; shared by all requests.
class TokenTexts {
 public:
  enum class Kind : uint8_t { Text, EndOfGeneration, Never };

  static std::shared_ptr<const TokenTexts> from_tokenizer(const Tokenizer& tokenizer);
  // pieces[id], kinds[id]: [n_vocab].
  TokenTexts(std::vector<std::string> pieces, std::vector<Kind> kinds);
  TokenTexts(const TokenTexts&) = delete;
  TokenTexts& operator=(const TokenTexts&) = delete;

  int32_t n_vocab() const { return static_cast<int32_t>(pieces_.size()); }
  const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
  Kind kind(int32_t id) const { return kinds_[static_cast<size_t>(id)]; }
  // The text tokens' prefix tree.
  const TokenTrie& trie() const { return trie_; }

  // Inside a string, which tokens stay inside it, and how many characters each begins there,
  // depends only on the string scanner's state (a length bound then compares those counts): those
  // counts, and the trie nodes where a byte closes the string (what may follow there depends on
  // the grammar), computed once per scanner state and kept.
  struct InString {
    // A token of n bytes begins at most n characters: the counts are exact while the longest
    // token is shorter than kLeaves bytes (allowed_tokens() walks with the matcher otherwise).
    static constexpr uint16_t kLeaves = 0xFFFF;
    std::vector<uint16_t>
        chars;  // [n_vocab] characters the token begins, or kLeaves: it closes or breaks the string
    struct Close {
      int32_t node;        // the closing quote's node
      std::string prefix;  // its prefix, the quote included
      uint16_t chars;      // characters begun before the quote
    };
    std::vector<Close> closes;
  };
  std::shared_ptr<const InString> in_string(const OutputMatcher::StringScan& scan) const;

 private:
  std::vector<std::string> pieces_;  // [n_vocab]
  std::vector<Kind> kinds_;          // [n_vocab]
  TokenTrie trie_;
  mutable std::mutex in_string_mutex_;
  mutable std::vector<std::pair<OutputMatcher::StringScan, std::shared_ptr<const InString>>>
      in_string_;
};

class GrammarConstraint final : public TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const OutputGrammar> grammar,
                    std::shared_ptr<const TokenTexts> texts);

  std::unique_ptr<TokenConstraint> clone() const override;
  bool allows(int32_t token) const override;
  void allowed_tokens(int32_t n_vocab, std::vector<uint8_t>& allowed) const override;
  void accept(int32_t token) override;
  bool must_end() const override;
  bool may_end() const { return matcher_.may_end(); }

 private:
  std::shared_ptr<const TokenTexts> texts_;
  OutputMatcher matcher_;
};

}  // namespace tangram
