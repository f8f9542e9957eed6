// The recall set's parser (clear errors that name the line) and its exact-match rule, which must
// agree with the training recipe's scorer (tools/train/scorer.py and test_scorer.py: the same
// cases here).
#include <gtest/gtest.h>

#include "evaluation/recall_set.h"
#include "support/test_support.h"

namespace tangram {
namespace {

TEST(RecallMatch, ForgivesOnlyWhitespaceAndOneFinalPeriod) {
  EXPECT_TRUE(recall_match(" 4821.", "4821"));
  EXPECT_TRUE(recall_match("Oslo", "Oslo."));
  EXPECT_TRUE(recall_match("QX,  RT", "QX, RT"));
  EXPECT_TRUE(recall_match("a\nb", "a b"));
  EXPECT_EQ(normalize_recall_answer("  a  b. "), "a b");
  EXPECT_EQ(normalize_recall_answer("a ."), "a");
}

TEST(RecallMatch, EverythingElseIsWrong) {
  EXPECT_FALSE(recall_match("48 21", "4821"));
  EXPECT_FALSE(recall_match("oslo", "Oslo"));
  EXPECT_FALSE(recall_match("4821 or 4822", "4821"));
  EXPECT_FALSE(recall_match("", "4821"));
  EXPECT_FALSE(recall_match("RT, QX", "QX, RT"));
  EXPECT_FALSE(recall_match("4821..", "4821"));
}

TEST(RecallSet, ParsesConversationsAndTheirQuestions) {
  const std::string text =
      R"({"seed": 7, "kind": "single", "level": 2, "messages": [)"
      R"({"role": "system", "content": "Be brief.", "kind": "system"},)"
      R"({"role": "user", "content": "Remember: the code is 4821.", "kind": "fact"},)"
      R"({"role": "assistant", "content": "Noted.", "kind": "ack"},)"
      R"({"role": "user", "content": "What is the code?", "kind": "question"},)"
      R"({"role": "assistant", "content": "4821", "kind": "answer"}]})"
      "\n\n"
      R"({"kind": "update", "messages": [{"role": "user", "content": "x"},)"
      R"({"role": "assistant", "content": "y", "kind": "answer"}]})"
      "\n";
  auto set = parse_recall_set(text);
  ASSERT_TRUE(set.ok()) << set.message();
  ASSERT_EQ(set->size(), 2u);
  EXPECT_EQ((*set)[0].seed, 7u);
  EXPECT_EQ((*set)[0].kind, "single");
  ASSERT_EQ((*set)[0].messages.size(), 5u);
  EXPECT_EQ((*set)[0].questions(), 1);
  EXPECT_TRUE((*set)[0].messages[4].answer);
  EXPECT_FALSE((*set)[0].messages[2].answer);
  EXPECT_EQ((*set)[0].messages[4].content, "4821");
  EXPECT_EQ((*set)[1].questions(), 1);
}

TEST(RecallSet, RefusesMalformedLinesNamingThem) {
  const std::string good = R"({"kind": "single", "messages": [{"role": "user", "content": "q"},)"
                           R"({"role": "assistant", "content": "a", "kind": "answer"}]})";
  struct Case {
    std::string line, says;
  };
  const Case cases[] = {
      {"{not json", "line 2"},
      {"[1, 2]", "not a JSON object"},
      {R"({"messages": [{"role": "user", "content": "q"}]})", "no \"kind\""},
      {R"({"kind": "x"})", "no \"messages\""},
      {R"({"kind": "x", "messages": []})", "non-empty array"},
      {R"({"kind": "x", "seed": -1, "messages": [{"role": "user", "content": "q"}]})", "seed"},
      {R"({"kind": "x", "messages": [{"role": "tool", "content": "q"}]})", "unknown role"},
      {R"({"kind": "x", "messages": [{"role": "user", "content": 5}]})", "not a string"},
      {R"({"kind": "x", "messages": [{"role": "user"}]})", "needs \"role\" and \"content\""},
      {R"({"kind": "x", "messages": [{"role": "user", "content": "q", "kind": "answer"}]})",
       "must be the assistant's"},
      {R"({"kind": "x", "messages": [{"role": "assistant", "content": "a", "kind": "answer"}]})",
       "must follow the user message"},
  };
  for (const Case& c : cases) {
    auto set = parse_recall_set(good + "\n" + c.line + "\n");
    ASSERT_FALSE(set.ok()) << c.line;
    EXPECT_NE(set.message().find("line 2"), std::string::npos) << set.message();
    EXPECT_NE(set.message().find(c.says), std::string::npos) << c.line << ": " << set.message();
  }
  auto none = parse_recall_set(R"({"kind": "x", "messages": [{"role": "user", "content": "q"}]})");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.message().find("no question"), std::string::npos) << none.message();
  auto missing = load_recall_set((testing::temp_dir() / "no-such-recall-set.jsonl").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("cannot read"), std::string::npos) << missing.message();
}

TEST(RecallSet, TheShippedSetIsHeldOutAndWellFormed) {
  auto set = load_recall_set(testing::data_file("eval/recall-heldout.jsonl").string());
  ASSERT_TRUE(set.ok()) << set.message();
  EXPECT_EQ(set->size(), 96u);
  std::map<std::string, int> kinds;
  for (const RecallConversation& c : *set) {
    // tools/train/convgen.py: training seeds are below 2^40, held-out ones at or above it.
    EXPECT_GE(c.seed, uint64_t{1} << 40);
    EXPECT_GT(c.questions(), 0);
    ++kinds[c.kind];
  }
  EXPECT_EQ(kinds.size(), 6u);
  for (const auto& [kind, n] : kinds) EXPECT_EQ(n, 16) << kind;
}

}  // namespace
}  // namespace tangram
