#include "evaluation/recall_eval.h"

#include <algorithm>

#include <fmt/format.h>

namespace tangram {

namespace {

constexpr size_t kMissesKept = 20;

// KV kept at the end of the prompt against full KV's, from the request's compression report.
double retention_of(const RequestResult& done, const ModelConfig& cfg, size_t prompt_tokens) {
  if (done.compression.compressions == 0 || prompt_tokens == 0) return 1.0;
  const double full = static_cast<double>(cfg.n_layers) * static_cast<double>(cfg.n_kv_head) *
                      static_cast<double>(prompt_tokens);
  return std::min(1.0, static_cast<double>(done.compression.entries_after) / full);
}

}  // namespace

Result<RecallScore> run_recall(Model& model, const Tokenizer& tok, const ChatTemplate& tmpl,
                               const EngineOptions& engine_options,
                               const std::vector<RecallConversation>& conversations,
                               const RecallOptions& opt) {
  TG_ASSIGN(std::unique_ptr<Engine> engine, Engine::create(model, tok, engine_options));
  const std::string bos = tok.bos() >= 0 ? tok.token_text(tok.bos()) : "";
  const std::string eos = tok.eos() >= 0 ? tok.token_text(tok.eos()) : "";
  RecallScore score;
  double prompt_tokens = 0;
  double retention = 0;
  for (size_t c = 0; c < conversations.size(); ++c) {
    const RecallConversation& conv = conversations[c];
    const std::string session = fmt::format("recall-{}", c);
    std::vector<ChatMessage> history;
    for (const RecallMessage& m : conv.messages) {
      if (m.answer) {
        TG_ASSIGN(std::string text, tmpl.render(history, /*add_generation_prompt=*/true, bos, eos));
        Request r;
        r.prompt = tok.encode(text, /*add_special=*/false, /*parse_special=*/true);
        if (static_cast<int64_t>(r.prompt.size()) + opt.max_answer_tokens > engine->context())
          return make_error(
              "recall conversation {} (seed {}) reaches {} tokens before its answer, past the "
              "context of {}",
              c + 1, conv.seed, r.prompt.size(), engine->context());
        const size_t n_prompt = r.prompt.size();
        r.session_id = session;
        r.params.temperature = 0.0f;
        r.params.max_tokens = opt.max_answer_tokens;
        TG_ASSIGN(RequestResult done, engine->generate(std::move(r)));
        if (done.finish == FinishReason::Error)
          return make_error("recall conversation {} (seed {}): {}", c + 1, conv.seed, done.error);
        const bool ok = recall_match(done.text, m.content);
        RecallTally& kind = score.by_kind[conv.kind];
        ++kind.questions, ++score.all.questions;
        kind.correct += ok, score.all.correct += ok;
        prompt_tokens += static_cast<double>(n_prompt);
        retention += retention_of(done, model.config(), n_prompt);
        if (!ok && score.misses.size() < kMissesKept)
          score.misses.push_back({conv.kind, m.content, done.text});
      }
      ChatMessage msg;
      msg.role = m.role;
      msg.content = m.content;
      history.push_back(std::move(msg));
    }
    engine->drop_session(session);
    ++score.conversations;
    if (opt.on_progress)
      opt.on_progress(static_cast<int64_t>(c + 1), static_cast<int64_t>(conversations.size()));
  }
  if (score.all.questions > 0) {
    const auto n = static_cast<double>(score.all.questions);
    score.mean_prompt_tokens = prompt_tokens / n;
    score.mean_retention = retention / n;
  }
  return score;
}

}  // namespace tangram
