// Re-positioning a held conversation's KV when the server left its oldest turns out of the
// prompt to stay within the context (llama.cpp's context shift, on compressed caches): the
// prompt is then the held tokens with one range removed, then new tokens. Instead of
// recomputing everything after the range, its KV is kept and moved down (the keys re-rotated,
// PagedKvCache::remove_positions); the tokens before the range (the system prompt: the
// attention sinks) stay where they are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "kv/paged_kv_cache.h"
#include "model/rope.h"

namespace tangram {

struct ContextShift {
  int64_t from = 0;  // held tokens [from, to) are not in the prompt
  int64_t to = 0;
  int64_t kept = 0;  // held tokens [to, to + kept) equal the prompt's from `from` on
};

// Where `prompt` goes on as `held` with [from, to) removed: from = common (their common prefix),
// and the `to` > from from which the most held tokens equal the prompt's from `from` on (at least
// min_kept; the first to keep all the rest of held wins). Only part of the rest may match: a
// reply whose generated tokens are not how its text tokenizes again ends the match there, and
// the tokens after it are recomputed. nullopt when there is none. Bounded: at most
// kMaxShiftCandidates places are compared, so a prompt made to look alike everywhere costs at
// most that many scans.
inline constexpr int kMaxShiftCandidates = 256;
std::optional<ContextShift> find_context_shift(std::span<const int32_t> held,
                                               std::span<const int32_t> prompt, size_t common,
                                               int64_t min_kept);

// The rotation remove_positions needs: stored keys [n][head_dim] moved back delta positions
// by the model's RoPE.
PagedKvCache::KeyRotation key_rotation(const Rope& rope, int head_dim);

}  // namespace tangram
