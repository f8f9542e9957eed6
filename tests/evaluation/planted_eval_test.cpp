// Planted-facts accuracy through the serving engine, on the real TinyStories model (which
// cannot answer: the test checks the pipeline, not the score).
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "evaluation/planted_eval.h"
#include "evaluation/planted_facts.h"
#include "support/test_support.h"

namespace tangram {
namespace {

TEST(PlantedEval, PlaysTheWholeChatAndScoresEveryQuestion) {
  auto model = Model::load(testing::data_file("models/stories260K/stories260K.gguf").string());
  ASSERT_TRUE(model.ok()) << model.message();
  auto tok = Tokenizer::from_gguf((*model)->gguf());
  ASSERT_TRUE(tok.ok()) << tok.message();
  auto tmpl = ChatTemplate::builtin("chatml");
  ASSERT_TRUE(tmpl.ok());
  EngineOptions eo;
  eo.threads = 2;
  eo.scheduler.kv_memory = size_t{16} << 20;
  PlantedFactsOptions po;
  po.n_facts = 3;
  po.filler_words = 400;  // too long for a 2048-token context with this vocabulary: shrunk to fit
  po.max_answer_tokens = 8;
  auto a = run_planted_facts(**model, **tok, *tmpl, eo, po);
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(a->questions, make_planted_conversation(po.seed, po.n_facts, 10).n_questions());
  EXPECT_EQ(static_cast<int64_t>(a->answers.size()), a->questions);
  EXPECT_EQ(a->expected.size(), a->answers.size());
  EXPECT_LE(a->conversation_tokens, (*model)->config().context_length);
  EXPECT_GT(a->conversation_tokens, 1000);  // the filler was shrunk, not dropped
  int64_t correct = 0;
  for (size_t i = 0; i < a->answers.size(); ++i)
    correct += exact_match(a->answers[i], a->expected[i]) ? 1 : 0;
  EXPECT_EQ(correct, a->correct);
  // Greedy: the same chat gives the same answers.
  auto b = run_planted_facts(**model, **tok, *tmpl, eo, po);
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ(a->answers, b->answers);
}

}  // namespace
}  // namespace tangram
