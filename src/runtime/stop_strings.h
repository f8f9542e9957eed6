// Streaming stop-string matcher for generated text.
//
// Generated text arrives in pieces (one per token) and a stop string may straddle pieces. feed()
// returns only text that can no longer become part of a stop string, holding back the longest
// tail that is still a prefix of one; once a stop string completes, everything before it is
// returned, the stop string itself is dropped, and the matcher stays stopped. When several stop
// strings occur, the one that completes first (earliest end byte) wins -- that is where
// token-by-token generation would have stopped -- and among those ending on the same byte the
// longest (earliest start). The outcome therefore does not depend on how the text is split.
//
// It also holds back an incomplete UTF-8 sequence at the end (at most 3 bytes), so with valid
// UTF-8 input every returned chunk is valid UTF-8 on its own, even when a token ends mid-character.
// Matching is byte-wise; for valid UTF-8 text and stop strings, byte matches fall on character
// boundaries.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tangram {

class StopStringMatcher {
 public:
  struct Step {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string completed; `text` is all that preceded it
    int stop_index = -1;   // index into the constructor's list of the stop string that matched
  };

  // Empty strings are ignored (they would match everywhere); SamplingParams::validate rejects them.
  explicit StopStringMatcher(const std::vector<std::string>& stop_strings);

  // Appends a piece of generated text. After a stop, returns nothing more.
  Step feed(std::string_view piece);
  // End of generation: returns whatever was held back (empty after a stop).
  std::string flush();

  bool stopped() const { return stop_index_ >= 0; }
  int stop_index() const { return stop_index_; }
  // Bytes currently held back.
  size_t held() const { return pending_.size(); }

 private:
  // Knuth-Morris-Pratt automaton: after each byte, `state` is the length of the longest suffix
  // of the text so far that is a prefix of `text`, so held-back text never needs rescanning.
  struct Pattern {
    std::string text;
    std::vector<size_t> fallback;  // [text.size()]: longest proper border of text[0, i]
    int index = 0;                 // position in the constructor's list
    size_t state = 0;
  };
  static size_t advance(const Pattern& p, size_t state, char byte);

  std::vector<Pattern> patterns_;
  std::string pending_;  // [held bytes] text not yet returned
  int stop_index_ = -1;
};

}  // namespace tangram
