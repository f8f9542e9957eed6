// Task accuracy of a KV policy on held-out recall conversations (recall_set.h), played as a
// client plays a chat against the serving engine: for every question, the conversation so far
// (the set's own messages, the gold answers of earlier questions included, as a client sends
// its history) is rendered by the chat template and sent under the conversation's session id;
// the resident KV is reused for the common prefix and compressed by the engine's policy at its
// compression points (every compression chunk and the end of each prompt), and the greedy reply
// is scored by recall_match. Conversations run one after another, each dropped when done.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "common/result.h"
#include "engine/engine.h"
#include "evaluation/recall_set.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tangram {

struct RecallOptions {
  int max_answer_tokens = 48;  // per question; the set's answers are a few words
  // Called after each conversation with (done, total); may be empty.
  std::function<void(int64_t, int64_t)> on_progress;
};

struct RecallTally {
  int64_t questions = 0;
  int64_t correct = 0;
  double accuracy() const {
    return questions > 0 ? static_cast<double>(correct) / static_cast<double>(questions) : 0.0;
  }
};

struct RecallScore {
  RecallTally all;
  std::map<std::string, RecallTally> by_kind;
  int64_t conversations = 0;
  double mean_prompt_tokens = 0;  // over questions: the rendered conversation up to each
  // KV kept at each question against full KV's (entries after the prompt's last compression
  // over layers x KV heads x prompt tokens; 1 where nothing was compressed), mean over questions.
  double mean_retention = 0;
  struct Miss {  // the first misses, for reports
    std::string kind, expected, answer;
  };
  std::vector<Miss> misses;
};

// Errors: the template fails, a conversation outgrows the engine's context, the engine fails.
Result<RecallScore> run_recall(Model& model, const Tokenizer& tokenizer, const ChatTemplate& tmpl,
                               const EngineOptions& engine_options,
                               const std::vector<RecallConversation>& conversations,
                               const RecallOptions& options = {});

}  // namespace tangram
