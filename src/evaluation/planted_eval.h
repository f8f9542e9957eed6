// Planted-facts accuracy of a KV policy on a real chat model: the conversation of
// planted_facts.h played turn by turn as one multi-turn chat session through the serving engine
// (greedy answers, the whole conversation rendered by the chat template at every turn, the
// session's KV reused and compressed as in serving), each question turn scored by exact_match.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "common/result.h"
#include "engine/engine.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tangram {

struct PlantedFactsOptions {
  uint64_t seed = 1;
  int n_facts = 4;
  int filler_words = 300;      // filler words before each fact
  int max_answer_tokens = 32;  // per turn
};

struct PlantedFactsScore {
  int64_t questions = 0;
  int64_t correct = 0;
  int64_t conversation_tokens = 0;    // prompt tokens of the last turn
  std::vector<std::string> expected;  // [questions]
  std::vector<std::string> answers;   // [questions]
  double accuracy() const {
    return questions > 0 ? static_cast<double>(correct) / static_cast<double>(questions) : 0.0;
  }
};

// Errors: the template fails, the conversation outgrows the context, the engine fails a turn.
Result<PlantedFactsScore> run_planted_facts(Model& model, const Tokenizer& tokenizer,
                                            const ChatTemplate& tmpl,
                                            const EngineOptions& engine_options,
                                            const PlantedFactsOptions& options);

}  // namespace tangram
