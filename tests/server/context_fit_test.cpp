// Dropping the oldest turns of a conversation longer than the context: where it may be cut, the
// smallest cut that fits, the deep cut that leaves room for the next turns, and the sticky cut
// that a later turn finds again (so its KV is reused), on a model of token counts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/context_fit.h"

namespace tangram::server {
namespace {

ChatMessage msg(const std::string& role, const std::string& content) {
  ChatMessage m;
  m.role = role;
  m.content = content;
  return m;
}

// A conversation: a system prompt and `turns` user/assistant pairs, then a last user message.
std::vector<ChatMessage> conversation(int turns) {
  std::vector<ChatMessage> m = {msg("system", "sys")};
  for (int i = 0; i < turns; ++i) {
    // Appended rather than "u" + to_string(i): GCC 12 at -O3 flags that with a false -Wrestrict.
    std::string n = std::to_string(i);
    m.push_back(msg("user", std::string("u").append(n)));
    m.push_back(msg("assistant", std::string("a").append(n)));
  }
  m.push_back(msg("user", "last"));
  return m;
}

// Each message costs 10 tokens.
ContextFitProbe counting(const std::vector<ChatMessage>& m, std::vector<size_t> held = {}) {
  return ContextFitProbe{
      [m](size_t drop) { return static_cast<int64_t>(10 * drop_oldest(m, drop).size()); },
      [held](size_t drop) { return std::find(held.begin(), held.end(), drop) != held.end(); }};
}

TEST(ContextFit, CutPointsStartAtUserMessagesAndKeepTheLast) {
  std::vector<ChatMessage> m = conversation(2);  // sys u0 a0 u1 a1 last
  EXPECT_EQ(cut_points(m), (std::vector<size_t>{0, 2, 4}));
  // A tool exchange stays whole: no cut lands on the assistant's call or its result.
  m = {msg("system", "s"),  msg("user", "q"),      msg("assistant", "call"), msg("tool", "r"),
       msg("user", "next"), msg("assistant", "a"), msg("user", "last")};
  EXPECT_EQ(cut_points(m), (std::vector<size_t>{0, 3, 5}));
  const auto kept = drop_oldest(m, 3);
  ASSERT_EQ(kept.size(), 4u);
  EXPECT_EQ(kept[0].role, "system");
  EXPECT_EQ(kept[1].content, "next");
}

TEST(ContextFit, AWholeConversationThatFitsIsKept) {
  const auto m = conversation(3);  // 8 messages, 80 tokens
  EXPECT_EQ(fit_to_context(m, 80, 40, counting(m)), size_t{0});
}

TEST(ContextFit, WithoutAHeldConversationTheCutIsDeep) {
  const auto m = conversation(5);  // 12 messages, 120 tokens
  // 100 tokens would need one pair dropped (100); the deep cut goes to 60 (three more pairs).
  const auto drop = fit_to_context(m, 100, 60, counting(m));
  ASSERT_TRUE(drop.has_value());
  EXPECT_EQ(*drop, 6u);
  EXPECT_EQ(drop_oldest(m, *drop).size(), 6u);
}

TEST(ContextFit, AHeldCutThatStillFitsIsTakenAgain) {
  const auto m = conversation(5);
  // An earlier turn cut 4 messages; it fits (80 <= 100): taken rather than the deep cut.
  EXPECT_EQ(fit_to_context(m, 100, 60, counting(m, {4})), size_t{4});
  // A held cut that no longer fits is not taken: the deep cut is.
  EXPECT_EQ(fit_to_context(m, 70, 40, counting(m, {2})), size_t{8});
}

TEST(ContextFit, NothingFitsWhenTheLastTurnAloneIsTooLong) {
  const auto m = conversation(2);
  EXPECT_EQ(fit_to_context(m, 15, 10, counting(m)), std::nullopt);
  // The system prompt and the last user message (20 tokens) are the least kept.
  EXPECT_EQ(fit_to_context(m, 20, 10, counting(m)), size_t{4});
}

// Turn after turn in a context of 100 tokens: the cut moves only when the history outgrows it,
// and each turn in between continues the one before.
TEST(ContextFit, TurnsReuseTheCutUntilItOverflows) {
  std::vector<size_t> held;
  size_t cut_moves = 0;
  size_t last_cut = 0;
  for (int turns = 1; turns < 30; ++turns) {
    const auto m = conversation(turns);
    const auto drop = fit_to_context(m, 100, 50, counting(m, held));
    ASSERT_TRUE(drop.has_value());
    EXPECT_LE(10 * drop_oldest(m, *drop).size(), 100u);
    if (*drop != last_cut) ++cut_moves;
    last_cut = *drop;
    held = {*drop};  // the server now holds this turn's conversation
  }
  // 29 turns of 20 tokens each through a 100-token window with cuts down to 50: the cut moves
  // about once every two to three turns, not every turn.
  EXPECT_LE(cut_moves, 14u);
  EXPECT_GE(cut_moves, 5u);
}

}  // namespace
}  // namespace tangram::server
