// Long conversations with planted facts, for measuring what KV compression forgets on a real
// instruct model (a needle-in-a-haystack test spread over turns, with no judge model).
//
// make_planted_conversation() writes its own filler: plain narrative sentences in the style of
// an old public-domain storybook, assembled from built-in word lists (a miller walks along the
// stone bridge at dawn, ...). Into it go n_facts facts, one per "fact turn", each of one of
// three kinds with a value unique in the conversation:
//   name   "Please remember this: the keeper of the copper lantern is named Marigold Thornby."
//   number "Please remember this: the number painted on the iron gate is 4817."
//   place  "Please remember this: the amber compass was made in a town called Eldwick."
// Later "question turns" ask for them ("What number is painted on the iron gate? ..."). A
// question never comes before its fact; some are asked between fact turns (always about a fact
// planted at least one turn earlier), the rest after the last fact, in a seeded order. Every
// fact turn is about `filler_words_between` words of filler (whole sentences, at least that
// many words) followed by the fact, and one filler-only turn follows the last fact, so each
// fact has at least that much filler on either side. The filler contains no digits and none of
// the names, places or subjects facts use, so an answer can only match if it recalls the fact.
//
// Scoring rule (exact_match): after normalising both strings (ASCII letters lower-cased; "," "."
// and "'" dropped when between two letters or digits, so "4,817" reads as "4817"; every other
// punctuation or whitespace run becomes one space), the expected value must appear in the
// answer as a whole run of words: "Marigold Thornby" matches "It is marigold thornby!" but
// "817" does not match "4817" and "Thornby, Marigold" does not match. One point per question
// turn whose answer matches; the accuracy is points / questions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tangram {

struct PlantedConversation {
  std::vector<std::string> user_turns;
  // One per user turn: the value a question turn asks for, "" for a non-question turn.
  std::vector<std::string> expected_answers;

  int64_t n_questions() const;
};

// Most facts one conversation can hold (each fact needs its own subject); larger n_facts are
// clamped to it.
inline constexpr int kMaxPlantedFacts = 144;

// The same (seed, n_facts, filler_words_between) always gives the same conversation, on every
// platform (the generator uses its own integer RNG). n_facts <= 0 gives an empty conversation;
// a negative filler_words_between counts as 0.
PlantedConversation make_planted_conversation(uint64_t seed, int n_facts, int filler_words_between);

// The scoring rule above. False when `expected` normalises to nothing.
bool exact_match(std::string_view answer, std::string_view expected);

// The normalised form exact_match compares (exposed for reports and tests).
std::string normalize_for_match(std::string_view text);

}  // namespace tangram
