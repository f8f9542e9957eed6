// Which API key owns which conversation, and the text and tokens each conversation's KV was
// built from, so that the next turn's prompt reuses it.
//
// Reuse is found two ways: an explicit session id (request field `session_id` or header
// `X-Session-Id`), or, without one, the caller's conversation whose history text the new rendered
// prompt extends (the longest). Each API key has its own namespace of ids: the same id under two
// keys names two conversations, so no key can take a name from another or learn that it exists.
//
// Tokens: the new prompt is the canonical tokenization of its text when that still begins with
// the conversation's tokens (then the output equals a fresh server's). When it does not (a reply
// whose generated tokens are not how its text tokenizes), the history tokens are kept as they
// are and only the new text is tokenized, so the cache is still reused in full: those tokens are
// what the model actually saw.
//
// Lifetime: a request holds its record from resolve_*() until record() (its turn succeeded) or
// abandon() (it failed). A record created by a request that fails before any turn of it
// succeeded is removed again: failures leave nothing. At most max_conversations records per
// owner (one key cannot push out another's): when a turn succeeds past that, the owner's least
// recently used records that no request holds are evicted (a failed request evicts nothing). A
// record that goes (erased, evicted, abandoned) is handed to `forget` with its engine session key,
// so that its KV goes too, in the engine and its tiers.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
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
  bool spliced = false;  // history tokens kept, new text tokenized on its own
  bool created = false;  // a new conversation
  uint64_t serial = 0;   // the record this request holds (0: none)
};

struct ConversationInfo {
  std::string id;
  int64_t turns = 0;  // -1: unknown (restored from a tier after a restart)
  int64_t tokens = 0;
  int64_t created_unix = 0;
  int64_t last_used_unix = 0;
};

class Conversations {
 public:
  // Called with the engine session key of a record that is gone. It runs under the records'
  // lock, so it must not block on anything that may wait for that lock (it queues the drop).
  using Forget = std::function<void(const std::string& engine_key)>;

  explicit Conversations(size_t max_per_owner, Forget forget = {})
      : max_(max_per_owner), forget_(std::move(forget)) {}

  // Resolves a text prompt (a rendered chat, or a completion prompt) of `owner`.
  // add_special: BOS/EOS as the vocabulary wants them (completions); a rendered chat has its own.
  // protected_ranges: the bytes of a rendered chat that came from its messages; no control token
  // is parsed there (see Tokenizer::encode). A history's tokens were encoded the same way, so the
  // next turn's prompt, rendered from the same messages plus new ones, still begins with them.
  // shifted: the prompt left out the oldest turns of a conversation to fit the context; without
  // an id, a conversation this prompt does not extend is still the one it continues when the
  // prompt is its history with one range of text removed (shifted_text_extent), so that its KV
  // can be moved rather than recomputed (the engine's context shift).
  std::optional<ApiError> resolve_text(const std::string& owner, const std::string& requested_id,
                                       const std::string& text, bool add_special,
                                       const Tokenizer& tok, ResolvedPrompt& out,
                                       std::span<const TextRange> protected_ranges = {},
                                       bool shifted = false);
  // A prompt that is `history` with text [from, to) removed and then more text: from is their
  // common prefix, to the smallest place after it from which the rest of the history begins the
  // rest of the prompt (at least 16 bytes of it). nullopt when the prompt is not of that form. At
  // most 256 places are compared in full.
  struct TextShift {
    size_t from = 0, to = 0;
  };
  static std::optional<TextShift> shifted_text(std::string_view history, std::string_view prompt);
  // Resolves a token-id prompt: an explicit id, or the caller's conversation whose tokens it
  // extends.
  std::optional<ApiError> resolve_tokens(const std::string& owner, const std::string& requested_id,
                                         std::vector<int32_t> tokens, ResolvedPrompt& out);

  // Runs `submit` (handing the turn to the engine) under the records' lock if the record `p`
  // resolved is still there, so that a delete either comes after the submission (and cancels
  // the turn in the engine) or before it (and the turn is refused): a deleted conversation is
  // never written again. Returns the not-available error, without running `submit`, otherwise.
  template <typename Submit>
  std::optional<ApiError> submit_if_current(const std::string& owner, const ResolvedPrompt& p,
                                            Submit&& submit) {
    std::lock_guard lock(mu_);
    if (find_held(owner, p) == nullptr) return not_available(p.public_id);
    submit();
    return std::nullopt;
  }

  // After a turn: the conversation now holds `text` (empty for token prompts) and `tokens`, and
  // the request no longer holds it. Nothing if it was deleted meanwhile.
  void record(const std::string& owner, const ResolvedPrompt& p, std::string text,
              std::vector<int32_t> tokens);
  // After a request that failed (refused, cancelled, an error): it no longer holds the record,
  // and a record no turn has succeeded on yet is removed (and forgotten).
  void abandon(const std::string& owner, const ResolvedPrompt& p);

  // Re-creates conversations from the engine's named sessions (after a restart with a disk tier):
  // each key "<owner>/<id>" of one of `owners` becomes a conversation of that owner whose history
  // text is its tokens decoded, so that the next turn finds it by id or by the prompt's text.
  // Keys of another shape, of an owner not in `owners` (a key no longer given: its sessions stay
  // unreachable), and ids already known are skipped; past an owner's limit they are forgotten.
  // Returns how many were restored.
  size_t restore(const std::vector<std::pair<std::string, std::vector<int32_t>>>& sessions,
                 const Tokenizer& tok, const std::set<std::string>& owners);

  // Whether `text` continues one of `owner`'s conversations (starts with its history text).
  bool continued_by(const std::string& owner, const std::string& text) const;

  std::vector<ConversationInfo> list(const std::string& owner) const;
  // Forgets a conversation of `owner` (also while a request holds it: that request's turn is
  // then cancelled by `forget`); returns its engine session key, or nullopt if `owner` has no
  // such conversation.
  std::optional<std::string> erase(const std::string& owner, const std::string& public_id);

  // The answer for an id the caller cannot use; the same whether it exists or not.
  static ApiError not_available(const std::string& id);

  static std::string engine_key(const std::string& owner, const std::string& public_id) {
    return owner + "/" + public_id;
  }

 private:
  struct Entry {
    std::string text;             // history text ("" for token-prompt conversations)
    std::vector<int32_t> tokens;  // history tokens
    int64_t turns = 0;
    int64_t created = 0;
    int64_t last_used = 0;
    uint64_t serial =
        0;  // unique over the records' lifetime: an id deleted and reused is another record
    int holders = 0;  // requests between resolve and record/abandon
    std::list<std::string>::iterator lru;
  };
  Entry* find_owned(const std::string& owner, const std::string& id);
  // The record `p` resolved to, if it is still there.
  Entry* find_held(const std::string& owner, const ResolvedPrompt& p);
  Entry& create(const std::string& owner, const std::string& id);
  // Evicts the owner's least recently used records that no request holds, except `keep`, while
  // it has more than max_.
  void trim(const std::string& owner, const std::string& keep);
  // Removes a record and hands its engine key to forget_.
  using Key = std::pair<std::string, std::string>;  // (owner, public id)
  void remove(std::map<Key, Entry>::iterator it);
  void touch(const std::string& owner, Entry& e);
  // The request now holds e (after a resolve).
  void hold(const std::string& owner, Entry& e, ResolvedPrompt& out);
  // The caller's conversation with the largest extent(entry) > 0 (how much of it the prompt
  // extends), or a new anonymous one.
  template <typename Extent>
  Entry& longest_extended(const std::string& owner, ResolvedPrompt& out, const Extent& extent);
  std::optional<ApiError> pick(const std::string& owner, const std::string& requested_id,
                               ResolvedPrompt& out, Entry*& entry);

  size_t max_;
  Forget forget_;
  mutable std::mutex mu_;
  std::map<Key, Entry> entries_;  // (owner, public id) -> entry: each owner its own namespace
  std::map<std::string, std::list<std::string>>
      lru_;  // owner -> its ids, front = least recently used
  uint64_t next_serial_ = 1;
};

}  // namespace tangram::server
