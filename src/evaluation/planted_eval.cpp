#include "evaluation/planted_eval.h"

#include "evaluation/planted_facts.h"

namespace tangram {

Result<PlantedFactsScore> run_planted_facts(Model& model, const Tokenizer& tok,
                                            const ChatTemplate& tmpl,
                                            const EngineOptions& engine_options,
                                            const PlantedFactsOptions& opt) {
  // Shrinks the filler until the whole chat (turns, answers, a template's overhead per message)
  // fits 90% of the context: tokens per word differ a lot between vocabularies.
  const auto context = static_cast<double>(engine_options.scheduler.max_context > 0
                                               ? engine_options.scheduler.max_context
                                               : model.config().context_length);
  int filler = opt.filler_words;
  PlantedConversation conv = make_planted_conversation(opt.seed, opt.n_facts, filler);
  for (int attempt = 0; attempt < 8; ++attempt) {
    double tokens = 0;
    for (const std::string& u : conv.user_turns)
      tokens +=
          static_cast<double>(tok.encode(u, false, false).size()) + opt.max_answer_tokens + 16;
    if (tokens <= 0.9 * context || filler == 0) break;
    filler = static_cast<int>(filler * 0.85 * context / tokens);
    conv = make_planted_conversation(opt.seed, opt.n_facts, filler);
  }
  TG_ASSIGN(std::unique_ptr<Engine> engine, Engine::create(model, tok, engine_options));
  const std::string bos = tok.bos() >= 0 ? tok.token_text(tok.bos()) : "";
  const std::string eos = tok.eos() >= 0 ? tok.token_text(tok.eos()) : "";
  std::vector<ChatMessage> messages;
  PlantedFactsScore score;
  for (size_t t = 0; t < conv.user_turns.size(); ++t) {
    ChatMessage user;
    user.role = "user";
    user.content = conv.user_turns[t];
    messages.push_back(std::move(user));
    TG_ASSIGN(std::string text, tmpl.render(messages, /*add_generation_prompt=*/true, bos, eos));
    Request r;
    r.prompt = tok.encode(text, /*add_special=*/false, /*parse_special=*/true);
    r.session_id = "planted-facts";
    r.params.temperature = 0.0f;
    r.params.max_tokens = opt.max_answer_tokens;
    score.conversation_tokens = static_cast<int64_t>(r.prompt.size());
    TG_ASSIGN(RequestResult done, engine->generate(std::move(r)));
    if (done.finish == FinishReason::Error)
      return make_error("planted facts, turn {} of {}: {}", t + 1, conv.user_turns.size(),
                        done.error);
    if (!conv.expected_answers[t].empty()) {
      ++score.questions;
      score.correct += exact_match(done.text, conv.expected_answers[t]) ? 1 : 0;
      score.expected.push_back(conv.expected_answers[t]);
      score.answers.push_back(done.text);
    }
    ChatMessage reply;
    reply.role = "assistant";
    reply.content = done.text;
    messages.push_back(std::move(reply));
  }
  return score;
}

}  // namespace tangram
