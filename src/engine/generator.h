// Single-sequence generation: prompt → prefill → sample/decode loop, streaming text as it is
// produced. This is the engine loop of one conversation; the scheduler that batches many
// sequences over a paged KV cache builds on the same Model/KvCache/Sampler pieces.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/thread_pool.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "runtime/finish_reason.h"
#include "runtime/sampling_params.h"
#include "tokenizer/tokenizer.h"

namespace tangram {


struct GenerationResult {
  std::vector<int32_t> tokens;  // [n_generated] generated ids (the end-of-generation token excluded)
  std::string text;             // generated text, stop string excluded
  FinishReason finish = FinishReason::Stop;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;    // prompt tokens already in the cache, not recomputed
  double prefill_seconds = 0;
  double decode_seconds = 0;    // from the first sampled token to the end
  uint64_t seed = 0;            // the sampler's seed (reproduce a run with it)
};

// Called with each newly completed piece of text; return false to cancel generation.
using TextCallback = std::function<bool(std::string_view)>;

class Generator {
 public:
  Generator(Model& model, const Tokenizer& tokenizer, ThreadPool& pool)
      : model_(model), tokenizer_(tokenizer), pool_(pool) {}

  // Generates after `prompt`. If `cache` already holds a prefix of `prompt` (a previous turn of
  // the same conversation), only the rest is prefilled; anything after the common prefix is
  // truncated first. Errors: empty prompt, prompt at or past the context length, invalid
  // sampling parameters, token ids out of range.
  Result<GenerationResult> generate(KvCache& cache, const std::vector<int32_t>& prompt,
                                    const SamplingParams& params, const TextCallback& on_text);

  // The tokens currently in `cache` for this generator's conversation (prompt + generated),
  // kept so a following turn can reuse the matching prefix.
  const std::vector<int32_t>& cached_tokens() const { return cached_; }
  void reset() { cached_.clear(); }

 private:
  Model& model_;
  const Tokenizer& tokenizer_;
  ThreadPool& pool_;
  std::vector<int32_t> cached_;  // tokens whose K/V are in the cache, in order
};

}  // namespace tangram
