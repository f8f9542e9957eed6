// Which API key owns which conversation, and the text and tokens each conversation's KV was
// built from, so that the next turn's prompt reuses it.
//
// Reuse is found two ways: an explicit session id (request field `session_id` or header
// `X-Session-Id`), or, without one, the caller's conversation whose history text the new rendered
// prompt extends (the longest). Conversations of other keys are never candidates, and naming
// another key's id is refused with an error that does not say whether the id exists.
//
// Tokens: the new prompt is the canonical tokenization of its text when that still begins with
// the conversation's tokens (then the output equals a fresh server's). When it does not (a reply
// whose generated tokens are not how its text tokenizes), the history tokens are kept as they
// are and only the new text is tokenized, so the cache is still reused in full: those tokens are
// what the model actually saw.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "tokenizer/tokenizer.h"

namespace tangram::server {

struct ResolvedPrompt {
  std::string public_id;       // the id the client sees
  std::string engine_session;  // the scheduler's session key: "<owner>/<public_id>"
  std::vector<int32_t> tokens;
  bool spliced = false;        // history tokens kept, new text tokenized on its own
  bool created = false;        // a new conversation
};

struct ConversationInfo {
  std::string id;
  int64_t turns = 0;
  int64_t tokens = 0;
  int64_t created_unix = 0;
  int64_t last_used_unix = 0;
};

class Conversations {
 public:
  explicit Conversations(size_t max_conversations) : max_(max_conversations) {}

  // Resolves a text prompt (a rendered chat, or a completion prompt) of `owner`.
  // add_special: BOS/EOS as the vocabulary wants them (completions); a rendered chat has its own.
  // protected_ranges: the bytes of a rendered chat that came from its messages; no control token
  // is parsed there (see Tokenizer::encode). A history's tokens were encoded the same way, so the
  // next turn's prompt, rendered from the same messages plus new ones, still begins with them.
  std::optional<ApiError> resolve_text(const std::string& owner, const std::string& requested_id,
                                       const std::string& text, bool add_special, const Tokenizer& tok,
                                       ResolvedPrompt& out, std::span<const TextRange> protected_ranges = {});
  // Resolves a token-id prompt: an explicit id, or the caller's conversation whose tokens it extends.
  std::optional<ApiError> resolve_tokens(const std::string& owner, const std::string& requested_id,
                                         std::vector<int32_t> tokens, ResolvedPrompt& out);

  // After a turn: the conversation now holds `text` (empty for token prompts) and `tokens`.
  void record(const std::string& owner, const std::string& public_id, std::string text,
              std::vector<int32_t> tokens);

  // Re-creates conversations from the engine's named sessions (after a restart with a disk tier):
  // each key "<owner>/<id>" becomes a conversation of that owner whose history text is its
  // tokens decoded, so that the next turn finds it by id or by the prompt's text. Keys of another
  // shape, and ids already known, are skipped. Returns how many were restored.
  size_t restore(const std::vector<std::pair<std::string, std::vector<int32_t>>>& sessions, const Tokenizer& tok);

  std::vector<ConversationInfo> list(const std::string& owner) const;
  // Forgets a conversation of `owner`; returns its engine session key, or nullopt if `owner` has
  // no such conversation.
  std::optional<std::string> erase(const std::string& owner, const std::string& public_id);

  static std::string engine_key(const std::string& owner, const std::string& public_id) {
    return owner + "/" + public_id;
  }

 private:
  struct Entry {
    std::string owner;
    std::string text;             // history text ("" for token-prompt conversations)
    std::vector<int32_t> tokens;  // history tokens
    int64_t turns = 0;
    int64_t created = 0;
    int64_t last_used = 0;
    std::list<std::string>::iterator lru;
  };
  Entry* find_owned(const std::string& owner, const std::string& id);
  Entry& create(const std::string& owner, const std::string& id);
  void touch(Entry& e);
  // The caller's conversation with the largest extent(entry) > 0 (how much of it the prompt
  // extends), or a new anonymous one.
  template <typename Extent>
  Entry& longest_extended(const std::string& owner, ResolvedPrompt& out, const Extent& extent);
  std::optional<ApiError> pick(const std::string& owner, const std::string& requested_id, ResolvedPrompt& out,
                               Entry*& entry);

  size_t max_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;  // public id -> entry (ids are global, owners checked)
  std::list<std::string> lru_;            // front = least recently used
};

}  // namespace tangram::server
