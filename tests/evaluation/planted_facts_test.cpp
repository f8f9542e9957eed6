// Planted-fact conversations (evaluation/planted_facts.h): deterministic per seed, every fact
// planted exactly once and asked exactly once, never before it is planted, with the filler
// asked for around it; and the exact-match scoring rule on hand-picked answers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string>

#include "evaluation/planted_facts.h"

namespace tangram {
namespace {

// Space-separated words of text[0, end).
int64_t word_count(const std::string& text, size_t end = std::string::npos) {
  int64_t n = 0;
  bool in_word = false;
  for (size_t i = 0; i < end && i < text.size(); ++i) {
    const bool space = text[i] == ' ';
    if (!space && !in_word) ++n;
    in_word = !space;
  }
  return n;
}

int64_t words_before(const std::string& turn, const std::string& marker) {
  return word_count(turn, turn.find(marker));
}

TEST(PlantedFacts, DeterministicPerSeed) {
  const PlantedConversation a = make_planted_conversation(7, 12, 80);
  const PlantedConversation b = make_planted_conversation(7, 12, 80);
  const PlantedConversation c = make_planted_conversation(8, 12, 80);
  EXPECT_EQ(a.user_turns, b.user_turns);
  EXPECT_EQ(a.expected_answers, b.expected_answers);
  EXPECT_NE(a.user_turns, c.user_turns);
  EXPECT_NE(a.expected_answers, c.expected_answers);
}

TEST(PlantedFacts, EveryFactIsPlantedOnceAndAskedAfterIt) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const int n_facts = 1 + static_cast<int>(seed % 9);
    const int filler = static_cast<int>(seed * 7 % 60);
    const PlantedConversation conv = make_planted_conversation(seed, n_facts, filler);
    ASSERT_EQ(conv.user_turns.size(), conv.expected_answers.size());
    // n fact turns, one filler-only turn, n question turns.
    EXPECT_EQ(conv.user_turns.size(), static_cast<size_t>(2 * n_facts + 1));
    EXPECT_EQ(conv.n_questions(), n_facts);
    std::set<std::string> values;
    int fact_turns = 0;
    for (size_t i = 0; i < conv.user_turns.size(); ++i) {
      const std::string& turn = conv.user_turns[i];
      const std::string& want = conv.expected_answers[i];
      if (turn.find("Please remember this:") != std::string::npos) {
        ++fact_turns;
        EXPECT_GE(words_before(turn, "Please remember this:"), filler) << "seed " << seed;
      }
      if (want.empty()) continue;
      EXPECT_TRUE(values.insert(want).second) << "value asked twice: " << want;
      EXPECT_NE(turn.find('?'), std::string::npos);
      // Planted in exactly one turn, and that turn comes before the question.
      int planted = 0;
      size_t where = 0;
      for (size_t j = 0; j < conv.user_turns.size(); ++j)
        if (j != i && conv.expected_answers[j].empty() && exact_match(conv.user_turns[j], want)) {
          ++planted;
          where = j;
        }
      EXPECT_EQ(planted, 1) << "seed " << seed << " value " << want;
      EXPECT_LT(where, i) << "seed " << seed << " value " << want;
      // The question itself does not give the answer away.
      EXPECT_FALSE(exact_match(turn, want));
    }
    EXPECT_EQ(fact_turns, n_facts);
    // The last non-question turn is filler only, after every fact.
    size_t last_plain = 0, last_fact = 0;
    for (size_t i = 0; i < conv.user_turns.size(); ++i) {
      if (conv.expected_answers[i].empty()) last_plain = i;
      if (conv.user_turns[i].find("Please remember this:") != std::string::npos) last_fact = i;
    }
    EXPECT_GT(last_plain, last_fact);
    EXPECT_GE(word_count(conv.user_turns[last_plain]), std::max(filler, 1));
  }
}

TEST(PlantedFacts, FillerHasNoDigitsAndClampsAndEdgeCases) {
  const PlantedConversation conv = make_planted_conversation(3, 4, 200);
  for (size_t i = 0; i < conv.user_turns.size(); ++i) {
    std::string text = conv.user_turns[i];
    // Remove the fact sentence; what is left is filler or a question.
    const size_t at = text.find("Please remember this:");
    if (at != std::string::npos) text.resize(at);
    for (const char ch : text) EXPECT_FALSE(std::isdigit(static_cast<unsigned char>(ch))) << text;
  }
  EXPECT_TRUE(make_planted_conversation(1, 0, 50).user_turns.empty());
  EXPECT_TRUE(make_planted_conversation(1, -3, 50).user_turns.empty());
  const PlantedConversation big = make_planted_conversation(5, 1000, 0);
  EXPECT_EQ(big.n_questions(), kMaxPlantedFacts);
  std::set<std::string> distinct(big.expected_answers.begin(), big.expected_answers.end());
  distinct.erase("");
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kMaxPlantedFacts));
  EXPECT_EQ(make_planted_conversation(5, 2, -10).user_turns.size(), 5u);
}

TEST(PlantedFactsExactMatch, ScoringRule) {
  EXPECT_TRUE(exact_match("Marigold Thornby", "Marigold Thornby"));
  EXPECT_TRUE(exact_match("The keeper is marigold   THORNBY!", "Marigold Thornby"));
  EXPECT_TRUE(exact_match("It was made in Eldwick.", "Eldwick"));
  EXPECT_TRUE(exact_match("4,817", "4817"));
  EXPECT_TRUE(exact_match("The number is 4817.", "4817"));
  EXPECT_TRUE(exact_match("\"Eldwick\"", "eldwick"));
  EXPECT_TRUE(exact_match("Marigold\nThornby", "Marigold Thornby"));
  EXPECT_FALSE(exact_match("14817", "4817"));
  EXPECT_FALSE(exact_match("48170", "4817"));
  EXPECT_FALSE(exact_match("Thornby, Marigold", "Marigold Thornby"));
  EXPECT_FALSE(exact_match("Marigold", "Marigold Thornby"));
  EXPECT_FALSE(exact_match("Eldwicks", "Eldwick"));
  EXPECT_FALSE(exact_match("", "4817"));
  EXPECT_FALSE(exact_match("anything", ""));
  EXPECT_FALSE(exact_match("anything", " ,. "));
  EXPECT_EQ(normalize_for_match("  Hello, World!  It's 4,817.  "), "hello world its 4817");
}

}  // namespace
}  // namespace tangram
