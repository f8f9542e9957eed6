// What a request's output must look like, judged token by token: the seam through which the
// scheduler applies constrained decoding (a JSON schema, a tool-call syntax) to one sequence
// without knowing the grammar behind it.
//
// The scheduler samples first and asks allows() about the drawn token only; when it is refused,
// it asks allowed_tokens() for the whole vocabulary and samples again from the masked row. So a
// step costs one check while the model follows the constraint on its own.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace tangram {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;

  // A copy in the same state: a Request holds the initial state, each sequence its own copy.
  virtual std::unique_ptr<TokenConstraint> clone() const = 0;

  // Whether `token` may come next (an end-of-generation token: whether the output may end here).
  virtual bool allows(int32_t token) const = 0;
  // allowed[id] = allows(id) for every id in [0, n_vocab); the default asks allows() per token,
  // implementations may share work between tokens.
  virtual void allowed_tokens(int32_t n_vocab, std::vector<uint8_t>& allowed) const;
  // Advances past a token that allows() accepted.
  virtual void accept(int32_t token) = 0;
  // The output is complete and nothing may follow it: the sequence ends here.
  virtual bool must_end() const = 0;
};

inline void TokenConstraint::allowed_tokens(int32_t n_vocab, std::vector<uint8_t>& allowed) const {
  allowed.assign(static_cast<size_t>(n_vocab > 0 ? n_vocab : 0), 0);
  for (int32_t id = 0; id < n_vocab; ++id) allowed[static_cast<size_t>(id)] = allows(id) ? 1 : 0;
}

}  // namespace tangram
