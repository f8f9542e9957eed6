// Recall through the serving engine, on the real TinyStories model. An expected answer that is
// the model's own greedy reply to the question asked fresh (no session, nothing reused) must be
// matched under full KV: replaying the conversation in one session, its KV reused across
// questions and trimmed where the client's history departs from the model's reply, must answer
// exactly as a fresh prefill does. A question expecting what the model never says is a miss.
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "evaluation/recall_eval.h"
#include "support/test_support.h"

namespace tangram {
namespace {

struct Fixture {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
  std::optional<ChatTemplate> tmpl;
};

Fixture load() {
  Fixture f;
  auto model = Model::load(testing::data_file("models/stories260K/stories260K.gguf").string());
  EXPECT_TRUE(model.ok()) << model.message();
  f.model = std::move(model).value();
  auto tok = Tokenizer::from_gguf(f.model->gguf());
  EXPECT_TRUE(tok.ok()) << tok.message();
  f.tok = std::move(tok).value();
  auto tmpl = ChatTemplate::builtin("chatml");
  EXPECT_TRUE(tmpl.ok());
  f.tmpl = std::move(tmpl).value();
  return f;
}

EngineOptions engine_options() {
  EngineOptions eo;
  eo.threads = 2;
  eo.scheduler.kv_memory = size_t{16} << 20;
  return eo;
}

// The greedy reply of a fresh engine to `history`, rendered with the generation prompt.
std::string fresh_reply(Fixture& f, const std::vector<ChatMessage>& history, int max_tokens) {
  auto engine = Engine::create(*f.model, *f.tok, engine_options());
  EXPECT_TRUE(engine.ok()) << engine.message();
  auto text = f.tmpl->render(history, true, f.tok->token_text(f.tok->bos()), "");
  EXPECT_TRUE(text.ok()) << text.message();
  Request r;
  r.prompt = f.tok->encode(*text, false, true);
  r.params.temperature = 0.0f;
  r.params.max_tokens = max_tokens;
  auto done = (*engine)->generate(std::move(r));
  EXPECT_TRUE(done.ok()) << done.message();
  return done->text;
}

ChatMessage message(std::string role, std::string content) {
  ChatMessage m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

// Two conversations. "story": the first question expects "A ball." (which the model, a story
// writer, does not say: a miss), so the history the client sends next departs from the reply the
// engine generated and the session must be trimmed there; the second expects the fresh reply to
// that history (a hit). "never": one question expecting a text the model does not write.
std::vector<RecallConversation> make_set(Fixture& f, int max_tokens) {
  const std::string story =
      "Once upon a time there was a little girl named Lily. She loved to play in the park with "
      "her dog Max. One day they found a big red ball under a tree.";
  RecallConversation c;
  c.seed = 1;
  c.kind = "story";
  c.messages = {{"user", story, false},
                {"assistant", "What a nice story.", false},
                {"user", "What did Lily find?", false},
                {"assistant", "A ball.", true},
                {"user", "Who was with her?", false},
                {"assistant", "", true}};
  std::vector<ChatMessage> history;
  for (size_t i = 0; i + 1 < c.messages.size(); ++i)
    history.push_back(message(c.messages[i].role, c.messages[i].content));
  c.messages.back().content = fresh_reply(f, history, max_tokens);
  RecallConversation never;
  never.seed = 2;
  never.kind = "never";
  never.messages = {{"user", story, false},
                    {"user", "What did Lily find?", false},
                    {"assistant", "zq-never-said-0", true}};
  return {c, never};
}

TEST(RecallEval, ReusedKvAnswersAsAFreshPrefillAndMissesAreCounted) {
  Fixture f = load();
  const int max_tokens = 8;
  const std::vector<RecallConversation> set = make_set(f, max_tokens);
  RecallOptions ro;
  ro.max_answer_tokens = max_tokens;
  int64_t progress = 0;
  ro.on_progress = [&progress](int64_t done, int64_t total) {
    EXPECT_EQ(total, 2);
    progress = done;
  };
  auto s = run_recall(*f.model, *f.tok, *f.tmpl, engine_options(), set, ro);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(progress, 2);
  EXPECT_EQ(s->conversations, 2);
  EXPECT_EQ(s->all.questions, 3);
  EXPECT_EQ(s->by_kind.at("story").questions, 2);
  EXPECT_EQ(s->by_kind.at("story").correct, 1) << "replaying in one session changed an answer";
  EXPECT_EQ(s->by_kind.at("never").correct, 0);
  EXPECT_EQ(s->all.correct, 1);
  ASSERT_EQ(s->misses.size(), 2u);
  EXPECT_EQ(s->misses[0].expected, "A ball.");
  EXPECT_EQ(s->misses[1].kind, "never");
  EXPECT_DOUBLE_EQ(s->mean_retention, 1.0);
  EXPECT_GT(s->mean_prompt_tokens, 20.0);
}

TEST(RecallEval, ACompressingPolicyReportsTheRetentionItReached) {
  Fixture f = load();
  std::vector<RecallConversation> set = make_set(f, 8);
  // A longer history, so that the prompt crosses compression points.
  std::string filler;
  for (int i = 0; i < 12; ++i) filler += "The sun was warm and the birds sang in the tall trees. ";
  set[0].messages.insert(set[0].messages.begin(),
                         {{"user", filler, false}, {"assistant", "Yes.", false}});
  EngineOptions eo = engine_options();
  CompressionOptions& c = eo.scheduler.compression;
  c.policy = KvPolicy::Uniform;
  c.ratio = 0.5;
  c.chunk = 128;
  auto s = run_recall(*f.model, *f.tok, *f.tmpl, eo, set, {});
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->all.questions, 3);
  EXPECT_LT(s->mean_retention, 0.9);
  EXPECT_GT(s->mean_retention, 0.3);
}

TEST(RecallEval, AConversationPastTheContextIsAnError) {
  Fixture f = load();
  std::string long_text;
  for (int i = 0; i < 400; ++i) long_text += "Lily and Max ran to the park again. ";
  const std::vector<RecallConversation> set = {
      {3, "long", {{"user", long_text, false}, {"assistant", "x", true}}}};
  auto s = run_recall(*f.model, *f.tok, *f.tmpl, engine_options(), set, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("past the context"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tangram
