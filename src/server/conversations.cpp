#include "server/conversations.h"

#include <chrono>

#include <fmt/format.h>

#include "server/openai_response.h"

namespace tangram::server {
namespace {

int64_t now_unix() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool starts_with(const std::vector<int32_t>& v, const std::vector<int32_t>& prefix) {
  return prefix.size() <= v.size() && std::equal(prefix.begin(), prefix.end(), v.begin());
}

size_t common_prefix_length(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// [ids.size() + 1] byte offsets in the concatenated pieces where each token prefix ends (0 first).
// Two tokenizations of texts that share a prefix have a common boundary where these agree.
std::vector<size_t> token_end_offsets(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::vector<size_t> off(ids.size() + 1, 0);
  for (size_t k = 0; k < ids.size(); ++k) off[k + 1] = off[k] + tok.token_to_piece(ids[k]).size();
  return off;
}

}  // namespace

ApiError Conversations::not_available(const std::string& id) {
  // The same answer whether the id is unknown-but-taken or another key's: nothing leaks.
  return ApiError{404,
                  fmt::format("session '{}' is not available to this API key; use another id", id),
                  "invalid_request_error",
                  "session_id",
                  "session_not_found",
                  0};
}

Conversations::Entry* Conversations::find_owned(const std::string& owner, const std::string& id) {
  auto it = entries_.find({owner, id});
  return it == entries_.end() ? nullptr : &it->second;
}

Conversations::Entry* Conversations::find_held(const std::string& owner, const ResolvedPrompt& p) {
  Entry* e = find_owned(owner, p.public_id);
  return e != nullptr && p.serial != 0 && e->serial == p.serial ? e : nullptr;
}

void Conversations::touch(const std::string& owner, Entry& e) {
  e.last_used = now_unix();
  std::list<std::string>& lru = lru_[owner];
  lru.splice(lru.end(), lru, e.lru);
}

void Conversations::hold(const std::string& owner, Entry& e, ResolvedPrompt& out) {
  ++e.holders;
  out.serial = e.serial;
  touch(owner, e);
}

void Conversations::remove(std::map<Key, Entry>::iterator it) {
  const std::string key = engine_key(it->first.first, it->first.second);
  // An owner's list stays when empty (owners are the server's keys: few), so that trim()'s
  // reference to it stays valid while it evicts.
  lru_[it->first.first].erase(it->second.lru);
  entries_.erase(it);
  if (forget_) forget_(key);
}

Conversations::Entry& Conversations::create(const std::string& owner, const std::string& id) {
  std::list<std::string>& owned = lru_[owner];
  Entry& e = entries_[{owner, id}];
  e.created = e.last_used = now_unix();
  e.serial = next_serial_++;
  e.lru = owned.insert(owned.end(), id);
  return e;
}

void Conversations::trim(const std::string& owner, const std::string& keep) {
  // Only the owner's own records count and go: another key's traffic never evicts these. A
  // record a request holds is skipped (its turn is running); while those fill the limit the
  // owner exceeds it by the requests it has in flight (bounded by the server's queue).
  std::list<std::string>& owned = lru_[owner];
  for (auto victim = owned.begin(); owned.size() > max_ && victim != owned.end();) {
    auto it = entries_.find({owner, *victim++});
    if (it->second.holders == 0 && it->first.second != keep) remove(it);
  }
}

std::optional<ApiError> Conversations::pick(const std::string& owner,
                                            const std::string& requested_id, ResolvedPrompt& out,
                                            Entry*& entry) {
  if (requested_id.empty()) return std::nullopt;
  // Each key names its own conversations: another key's ids neither collide with these nor show.
  auto it = entries_.find({owner, requested_id});
  if (it == entries_.end()) {
    entry = &create(owner, requested_id);
    out.created = true;
  } else {
    entry = &it->second;
  }
  out.public_id = requested_id;
  return std::nullopt;
}

template <typename Extent>
Conversations::Entry& Conversations::longest_extended(const std::string& owner, ResolvedPrompt& out,
                                                      const Extent& extent) {
  Entry* best = nullptr;
  size_t best_extent = 0;
  for (auto it = entries_.lower_bound({owner, ""});
       it != entries_.end() && it->first.first == owner; ++it) {
    if (const size_t x = extent(it->second); x > best_extent) {
      best_extent = x;
      best = &it->second;
      out.public_id = it->first.second;
    }
  }
  if (best != nullptr) return *best;
  out.public_id = random_id("conv-");
  out.created = true;
  return create(owner, out.public_id);
}

std::optional<Conversations::TextShift> Conversations::shifted_text(std::string_view history,
                                                                    std::string_view prompt) {
  size_t a = 0;
  while (a < history.size() && a < prompt.size() && history[a] == prompt[a]) ++a;
  if (a == history.size() || a == prompt.size()) return std::nullopt;  // an extension, or nothing
  // The kept part history[b:] begins the prompt's rest: look for where the rest's first bytes
  // occur in the history, and compare in full from there. (A kept part shorter than the probe is
  // not worth finding: its KV is recomputed.)
  const std::string_view rest = prompt.substr(a);
  const std::string_view probe = rest.substr(0, std::min<size_t>(rest.size(), 16));
  int candidates = 0;
  for (size_t b = history.find(probe, a + 1); b != std::string_view::npos && candidates < 256;
       b = history.find(probe, b + 1), ++candidates) {
    const size_t kept = history.size() - b;
    if (kept <= rest.size() && rest.compare(0, kept, history.substr(b)) == 0)
      return TextShift{a, b};
  }
  return std::nullopt;
}

std::optional<ApiError> Conversations::resolve_text(const std::string& owner,
                                                    const std::string& requested_id,
                                                    const std::string& text, bool add_special,
                                                    const Tokenizer& tok, ResolvedPrompt& out,
                                                    std::span<const TextRange> protected_ranges,
                                                    bool shifted) {
  std::vector<int32_t> canonical =
      tok.encode(text, add_special, /*parse_special=*/true, protected_ranges);
  std::lock_guard lock(mu_);
  Entry* entry = nullptr;
  if (auto e = pick(owner, requested_id, out, entry)) return e;
  if (entry == nullptr) {
    // No id: the caller's conversation with the longest history text that this prompt extends.
    entry = &longest_extended(owner, out, [&](const Entry& e) {
      if (e.text.empty()) return size_t{0};
      if (text.compare(0, e.text.size(), e.text) == 0) return e.text.size();
      if (!shifted) return size_t{0};
      const auto s = shifted_text(e.text, text);
      return s ? s->from + (e.text.size() - s->to) : size_t{0};
    });
  }
  out.engine_session = engine_key(owner, out.public_id);
  const bool extends =
      !entry->text.empty() && text.compare(0, entry->text.size(), entry->text) == 0;
  if (extends && !starts_with(canonical, entry->tokens)) {
    // Splice: the history's own tokens up to the last text offset where both they and the
    // canonical tokenization have a token boundary, then the canonical tokens from there.
    const std::vector<size_t> oh = token_end_offsets(tok, entry->tokens);
    const std::vector<size_t> of = token_end_offsets(tok, canonical);
    size_t i = 0, j = 0, best_i = 0, best_j = 0;
    while (i < of.size() && j < oh.size()) {
      if (of[i] == oh[j]) {
        best_i = i;
        best_j = j;
        ++i;
        ++j;
      } else if (of[i] < oh[j]) {
        ++i;
      } else {
        ++j;
      }
    }
    if (best_j > common_prefix_length(canonical, entry->tokens)) {
      out.tokens.assign(entry->tokens.begin(),
                        entry->tokens.begin() + static_cast<std::ptrdiff_t>(best_j));
      out.tokens.insert(out.tokens.end(), canonical.begin() + static_cast<std::ptrdiff_t>(best_i),
                        canonical.end());
      out.spliced = true;
    }
  }
  if (!out.spliced) out.tokens = std::move(canonical);
  hold(owner, *entry, out);
  return std::nullopt;
}

std::optional<ApiError> Conversations::resolve_tokens(const std::string& owner,
                                                      const std::string& requested_id,
                                                      std::vector<int32_t> tokens,
                                                      ResolvedPrompt& out) {
  std::lock_guard lock(mu_);
  Entry* entry = nullptr;
  if (auto e = pick(owner, requested_id, out, entry)) return e;
  if (entry == nullptr) {
    entry = &longest_extended(owner, out, [&](const Entry& e) {
      return !e.tokens.empty() && starts_with(tokens, e.tokens) ? e.tokens.size() : 0;
    });
  }
  out.engine_session = engine_key(owner, out.public_id);
  out.tokens = std::move(tokens);
  hold(owner, *entry, out);
  return std::nullopt;
}

void Conversations::record(const std::string& owner, const ResolvedPrompt& p, std::string text,
                           std::vector<int32_t> tokens) {
  std::lock_guard lock(mu_);
  Entry* e = find_held(owner, p);
  if (e == nullptr) return;  // deleted meanwhile (the delete also dropped its KV)
  e->text = std::move(text);
  e->tokens = std::move(tokens);
  if (e->turns >= 0) ++e->turns;
  --e->holders;
  touch(owner, *e);
  // Only now, with a turn that succeeded, may a new record push out an older one: a request
  // that fails never costs its key a conversation.
  trim(owner, p.public_id);
}

void Conversations::abandon(const std::string& owner, const ResolvedPrompt& p) {
  std::lock_guard lock(mu_);
  Entry* e = find_held(owner, p);
  if (e == nullptr) return;
  --e->holders;
  // A record with no turn and no history came from failed requests only: it goes, with any KV a
  // cancelled first turn left in the engine.
  if (e->holders == 0 && e->turns == 0 && e->tokens.empty())
    remove(entries_.find({owner, p.public_id}));
}

size_t Conversations::restore(
    const std::vector<std::pair<std::string, std::vector<int32_t>>>& sessions, const Tokenizer& tok,
    const std::set<std::string>& owners) {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [key, tokens] : sessions) {
    const size_t slash = key.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == key.size() || tokens.empty())
      continue;
    const std::string owner = key.substr(0, slash), id = key.substr(slash + 1);
    if (owners.count(owner) == 0 || entries_.count({owner, id}) > 0) continue;
    if (lru_[owner].size() >= max_) {
      if (forget_)
        forget_(key);  // past the owner's limit: its KV goes, as an evicted record's would
      continue;
    }
    Entry& e = create(owner, id);
    e.tokens = tokens;
    e.turns = -1;  // the tiers keep the tokens, not how many turns made them
    // The rendered chat a history came from decodes back to itself (special tokens included),
    // so the next turn's prompt text extends it.
    e.text = tok.decode(tokens, /*skip_special=*/false);
    ++n;
  }
  return n;
}

bool Conversations::continued_by(const std::string& owner, const std::string& text) const {
  std::lock_guard lock(mu_);
  for (auto it = entries_.lower_bound(Key{owner, ""});
       it != entries_.end() && it->first.first == owner; ++it) {
    const std::string& h = it->second.text;
    if (!h.empty() && h.size() < text.size() && text.compare(0, h.size(), h) == 0) return true;
  }
  return false;
}

std::vector<ConversationInfo> Conversations::list(const std::string& owner) const {
  std::lock_guard lock(mu_);
  std::vector<ConversationInfo> out;
  for (auto it = entries_.lower_bound({owner, ""});
       it != entries_.end() && it->first.first == owner; ++it) {
    const Entry& e = it->second;
    out.push_back(
        {it->first.second, e.turns, static_cast<int64_t>(e.tokens.size()), e.created, e.last_used});
  }
  return out;
}

std::optional<std::string> Conversations::erase(const std::string& owner,
                                                const std::string& public_id) {
  std::lock_guard lock(mu_);
  auto it = entries_.find({owner, public_id});
  if (it == entries_.end()) return std::nullopt;
  remove(it);  // forget_ cancels a turn of it still running
  return engine_key(owner, public_id);
}

}  // namespace tangram::server
