#include "engine/generator.h"

#include <algorithm>
#include <chrono>

#include "runtime/sampler.h"
#include "runtime/stop_strings.h"
#include "tokenizer/stream_decoder.h"

namespace tangram {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Result<GenerationResult> Generator::generate(KvCache& cache, const std::vector<int32_t>& prompt,
                                             const SamplingParams& params,
                                             const TextCallback& on_text) {
  if (prompt.empty()) return make_error("the prompt is empty: give at least one token");
  const int64_t ctx = std::min<int64_t>(cache.capacity(), model_.config().context_length);
  if (static_cast<int64_t>(prompt.size()) >= ctx)
    return make_error("the prompt has {} tokens but the context holds {}: shorten it by at least {}",
                      prompt.size(), ctx, static_cast<int64_t>(prompt.size()) - ctx + 1);
  TG_ASSIGN(Sampler sampler, Sampler::create(params));
  std::vector<int32_t> eos_ids;
  for (int32_t id = 0; id < tokenizer_.n_vocab(); ++id)
    if (tokenizer_.is_eog(id)) eos_ids.push_back(id);
  sampler.set_eos_tokens(eos_ids);

  // Reuse the longest common prefix with what the cache holds; at least one prompt token is
  // always recomputed, since its logits start the generation.
  size_t common = 0;
  if (cache.n_positions() == static_cast<int64_t>(cached_.size())) {
    while (common < cached_.size() && common < prompt.size() && cached_[common] == prompt[common]) ++common;
  }
  common = std::min(common, prompt.size() - 1);
  cache.truncate(static_cast<int64_t>(common));
  cached_.resize(common);

  GenerationResult result;
  result.prompt_tokens = static_cast<int64_t>(prompt.size());
  result.cached_tokens = static_cast<int64_t>(common);
  result.seed = sampler.seed();

  const int32_t n_vocab = tokenizer_.n_vocab();
  std::vector<float> logits(static_cast<size_t>(model_.config().vocab));  // [vocab]
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t n_new = static_cast<int64_t>(prompt.size() - common);
  TG_TRY(cache.reserve(static_cast<int64_t>(prompt.size())));
  TG_TRY(model_.forward(cache, prompt.data() + common, n_new, static_cast<int64_t>(common),
                        logits.data(), pool_));
  cached_.assign(prompt.begin(), prompt.end());
  result.prefill_seconds = seconds_since(t0);

  std::vector<int32_t> history = prompt;  // penalties see the prompt too
  StreamDecoder decoder(tokenizer_);
  StopStringMatcher stops(params.stop);
  const auto t1 = std::chrono::steady_clock::now();
  bool cancelled = false;
  auto emit = [&](const std::string& text) {
    if (text.empty() || cancelled) return;
    result.text += text;
    if (on_text && !on_text(text)) cancelled = true;
  };

  result.finish = FinishReason::Length;
  for (;;) {
    const int32_t tok = sampler.sample(logits.data(), static_cast<int>(std::min<int64_t>(n_vocab, model_.config().vocab)), history);
    if (tok < 0) return make_error("sampling failed: the model produced no usable logits");
    if (!params.ignore_eos && tokenizer_.is_eog(tok)) {
      result.finish = FinishReason::Stop;
      break;
    }
    sampler.accept(tok);
    result.tokens.push_back(tok);
    history.push_back(tok);
    const auto step = stops.feed(decoder.push(tok));
    emit(step.text);
    if (step.stopped) {
      result.finish = FinishReason::Stop;
      break;
    }
    if (cancelled) {
      result.finish = FinishReason::Cancelled;
      break;
    }
    if (sampler.max_tokens_reached()) break;
    const int64_t pos = cache.n_positions();
    if (pos + 1 > ctx) break;  // context full: stop with "length"
    TG_TRY(cache.reserve(pos + 1));
    TG_TRY(model_.forward(cache, &tok, 1, pos, logits.data(), pool_));
    cached_.push_back(tok);
  }
  if (!stops.stopped()) {
    std::string tail = stops.feed(decoder.flush()).text;
    tail += stops.flush();
    emit(tail);
  }
  result.decode_seconds = seconds_since(t1);
  return result;
}

}  // namespace tangram
