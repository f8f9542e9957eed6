// Conversations longer than the model's context keep going: the oldest turns are dropped (the
// system prompt and the last user turn are kept) until the rendered prompt leaves room to answer.
//
// Where to cut matters for the KV cache: a cut that moves every turn would make every turn's
// prompt new, prefilled in full. So the cut is sticky: among the cuts that fit, one whose prompt
// continues a conversation the server holds is taken (its KV is reused); failing that, a deep
// cut is made (to `deep_budget` tokens), leaving room for the next turns to extend it, so that
// they find it again and reuse its KV until it no longer fits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "chat/chat_template.h"

namespace tangram::server {

// The places a conversation may be cut: counts of leading non-system messages to drop such that
// what remains starts with a user message; 0 (no cut) first, ascending. The last user message
// is never dropped.
std::vector<size_t> cut_points(const std::vector<ChatMessage>& messages);

// `messages` without the first `drop` non-system messages (system messages all kept).
std::vector<ChatMessage> drop_oldest(const std::vector<ChatMessage>& messages, size_t drop);

struct ContextFitProbe {
  // Tokens of the prompt rendered from the messages with the first `drop` non-system ones
  // dropped.
  std::function<int64_t(size_t drop)> tokens;
  // Whether that prompt continues a conversation the server holds (its text starts with one).
  std::function<bool(size_t drop)> continues;
};

// How many messages to drop so the prompt takes at most `budget` tokens: 0 when it fits whole;
// the smallest cut that fits and continues a held conversation, looked for among the next
// `max_probes` cuts; else the smallest cut within `deep_budget` (<= budget). nullopt: not even
// the system prompt and the last user turn fit.
std::optional<size_t> fit_to_context(const std::vector<ChatMessage>& messages, int64_t budget,
                                     int64_t deep_budget, const ContextFitProbe& probe,
                                     size_t max_probes = 32);

}  // namespace tangram::server
