// Held-out recall conversations (data/eval/recall-heldout.jsonl, made by
// tools/train/make_eval_set.py): multi-turn chats in which facts stated early are asked for
// later, after distractor turns, in the manner of RULER and SCBench. Task accuracy is the share
// of questions whose greedy answer matches the expected one (recall_match).
//
// File format: one JSON object per line,
//   {"seed": 1099512627776, "kind": "multikey",
//    "messages": [{"role": "user", "content": "...", "kind": "fact"}, ...]}
// roles system | user | assistant; an assistant message of kind "answer" is the expected reply
// to the user message just before it. Other fields are ignored.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace tangram {

struct RecallMessage {
  std::string role;     // system | user | assistant
  std::string content;  // for an answer: what the reply must be
  bool answer = false;  // an assistant reply that is scored
};

struct RecallConversation {
  uint64_t seed = 0;
  std::string kind;  // single, multikey, multival, update, vartrack, words, ...
  std::vector<RecallMessage> messages;
  int64_t questions() const;
};

// Most bytes a recall file may hold, and most messages per conversation: far above the shipped
// set (570 KB, at most a few dozen messages each), far below what would exhaust memory.
inline constexpr size_t kMaxRecallFileBytes = size_t{256} << 20;
inline constexpr size_t kMaxRecallMessages = 4096;

// Parses the file; an error names the line and what is wrong with it (not JSON, a missing or
// mistyped field, an unknown role, an answer that does not follow a user message, no answer at
// all in the file).
Result<std::vector<RecallConversation>> parse_recall_set(std::string_view text);
Result<std::vector<RecallConversation>> load_recall_set(const std::string& path);

// The scoring rule, the recipe's own (tools/train/scorer.py): both texts with surrounding
// whitespace dropped, inner whitespace runs squeezed to one space, then one final period (and
// the whitespace before it) dropped; then equal, case included ("4821." matches "4821"; "48 21",
// "The code is 4821" and "alice" for "Alice" do not).
std::string normalize_recall_answer(std::string_view text);
bool recall_match(std::string_view answer, std::string_view expected);

}  // namespace tangram
