#include "server/conversations.h"

#include <chrono>

#include <fmt/format.h>

#include "server/openai_response.h"

namespace tangram::server {
namespace {

int64_t now_unix() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool starts_with(const std::vector<int32_t>& v, const std::vector<int32_t>& prefix) {
  return prefix.size() <= v.size() && std::equal(prefix.begin(), prefix.end(), v.begin());
}

ApiError not_available(const std::string& id) {
  // The same answer whether the id is unknown-but-taken or another key's: nothing leaks.
  return ApiError{404, fmt::format("session '{}' is not available to this API key; use another id", id),
                  "invalid_request_error", "session_id", "session_not_found", 0};
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

Conversations::Entry* Conversations::find_owned(const std::string& owner, const std::string& id) {
  auto it = entries_.find(id);
  return it == entries_.end() || it->second.owner != owner ? nullptr : &it->second;
}

void Conversations::touch(Entry& e) {
  e.last_used = now_unix();
  lru_.splice(lru_.end(), lru_, e.lru);
}

Conversations::Entry& Conversations::create(const std::string& owner, const std::string& id) {
  while (entries_.size() >= max_ && !lru_.empty()) {
    entries_.erase(lru_.front());
    lru_.pop_front();
  }
  Entry& e = entries_[id];
  e.owner = owner;
  e.created = e.last_used = now_unix();
  e.lru = lru_.insert(lru_.end(), id);
  return e;
}

std::optional<ApiError> Conversations::pick(const std::string& owner, const std::string& requested_id,
                                            ResolvedPrompt& out, Entry*& entry) {
  if (requested_id.empty()) return std::nullopt;
  auto it = entries_.find(requested_id);
  if (it != entries_.end() && it->second.owner != owner) return not_available(requested_id);
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
  for (auto& [id, e] : entries_) {
    if (e.owner != owner) continue;
    if (const size_t x = extent(e); x > best_extent) {
      best_extent = x;
      best = &e;
      out.public_id = id;
    }
  }
  if (best != nullptr) return *best;
  out.public_id = random_id("conv-");
  out.created = true;
  return create(owner, out.public_id);
}

std::optional<ApiError> Conversations::resolve_text(const std::string& owner, const std::string& requested_id,
                                                    const std::string& text, bool add_special,
                                                    const Tokenizer& tok, ResolvedPrompt& out,
                                                    std::span<const TextRange> protected_ranges) {
  std::vector<int32_t> canonical = tok.encode(text, add_special, /*parse_special=*/true, protected_ranges);
  std::lock_guard lock(mu_);
  Entry* entry = nullptr;
  if (auto e = pick(owner, requested_id, out, entry)) return e;
  if (entry == nullptr) {
    // No id: the caller's conversation with the longest history text that this prompt extends.
    entry = &longest_extended(owner, out, [&](const Entry& e) {
      return e.text.empty() ? 0 : (text.compare(0, e.text.size(), e.text) == 0 ? e.text.size() : 0);
    });
  }
  out.engine_session = engine_key(owner, out.public_id);
  const bool extends = !entry->text.empty() && text.compare(0, entry->text.size(), entry->text) == 0;
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
      out.tokens.assign(entry->tokens.begin(), entry->tokens.begin() + static_cast<std::ptrdiff_t>(best_j));
      out.tokens.insert(out.tokens.end(), canonical.begin() + static_cast<std::ptrdiff_t>(best_i), canonical.end());
      out.spliced = true;
    }
  }
  if (!out.spliced) out.tokens = std::move(canonical);
  touch(*entry);
  return std::nullopt;
}

std::optional<ApiError> Conversations::resolve_tokens(const std::string& owner, const std::string& requested_id,
                                                      std::vector<int32_t> tokens, ResolvedPrompt& out) {
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
  touch(*entry);
  return std::nullopt;
}

void Conversations::record(const std::string& owner, const std::string& public_id, std::string text,
                           std::vector<int32_t> tokens) {
  std::lock_guard lock(mu_);
  Entry* e = find_owned(owner, public_id);
  if (e == nullptr) return;  // dropped meanwhile
  e->text = std::move(text);
  e->tokens = std::move(tokens);
  ++e->turns;
  touch(*e);
}

size_t Conversations::restore(const std::vector<std::pair<std::string, std::vector<int32_t>>>& sessions,
                              const Tokenizer& tok) {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [key, tokens] : sessions) {
    const size_t slash = key.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == key.size() || tokens.empty()) continue;
    const std::string id = key.substr(slash + 1);
    if (entries_.count(id) > 0) continue;
    Entry& e = create(key.substr(0, slash), id);
    e.tokens = tokens;
    // The rendered chat a history came from decodes back to itself (special tokens included),
    // so the next turn's prompt text extends it.
    e.text = tok.decode(tokens, /*skip_special=*/false);
    ++n;
  }
  return n;
}

std::vector<ConversationInfo> Conversations::list(const std::string& owner) const {
  std::lock_guard lock(mu_);
  std::vector<ConversationInfo> out;
  for (const auto& [id, e] : entries_) {
    if (e.owner != owner) continue;
    out.push_back({id, e.turns, static_cast<int64_t>(e.tokens.size()), e.created, e.last_used});
  }
  return out;
}

std::optional<std::string> Conversations::erase(const std::string& owner, const std::string& public_id) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(public_id);
  if (it == entries_.end() || it->second.owner != owner) return std::nullopt;
  lru_.erase(it->second.lru);
  entries_.erase(it);
  return engine_key(owner, public_id);
}

}  // namespace tangram::server
