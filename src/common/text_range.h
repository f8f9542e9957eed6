// A byte range [begin, end) of a string. Used to mark which parts of a rendered chat prompt came
// from message content, so that the tokenizer does not turn them into control tokens.
#pragma once

#include <cstddef>

namespace tangram {

struct TextRange {
  size_t begin = 0;
  size_t end = 0;  // exclusive

  friend bool operator==(const TextRange&, const TextRange&) = default;
};

}  // namespace tangram
