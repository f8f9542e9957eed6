// Per-request sampling settings (OpenAI / llama.cpp conventions) and their validation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace tangram {

struct SamplingParams {
  float temperature = 0.8f;         // 0 = greedy (argmax); valid range [0, 100]
  int top_k = 40;                   // keep the k most likely tokens; 0 = off
  float top_p = 0.95f;              // nucleus mass in (0, 1]; 1 = off
  float min_p = 0.05f;              // keep p >= min_p * p_max, in [0, 1]; 0 = off
  float repetition_penalty = 1.0f;  // CTRL-style, > 0; 1 = off
  float presence_penalty = 0.0f;    // OpenAI, [-2, 2]; 0 = off
  float frequency_penalty = 0.0f;   // OpenAI, [-2, 2]; 0 = off
  int penalty_last_n = 64;          // penalty window in tokens; 0 = off, -1 = whole history
  uint64_t seed = 0;                // used only when seed_set
  bool seed_set = false;            // false: the sampler draws a random seed and reports it
  int max_tokens = 0;               // tokens to generate; 0 = no limit besides the context
  std::vector<std::string> stop;    // stop strings (non-empty), matched on generated text
  bool ignore_eos = false;          // keep generating past end-of-sequence tokens

  // Ok, or an error naming the first out-of-range field, its valid range and the given value.
  Status validate() const;
};

}  // namespace tangram
