// The model's log-probabilities at one step, for OpenAI's logprobs: log-softmax of the raw
// logits (before penalties, bans and temperature: what the model itself predicts, as vLLM and
// OpenAI report), for the chosen token and the most likely alternatives.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace tangram {

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // the top_n most likely (id, logprob), best first
};

inline constexpr int kMaxTopLogprobs = 20;

// logits: [n_vocab] raw scores; top_n in [0, kMaxTopLogprobs]. Ties among the top go to the lower
// id. NaN logits count as -inf. One pass for the normaliser, one bounded selection for the top.
TokenLogprob token_logprob(std::span<const float> logits, int32_t chosen, int top_n);

}  // namespace tangram
