#include "scheduler/context_shift.h"

#include <algorithm>
#include <vector>

namespace tangram {

std::optional<ContextShift> find_context_shift(std::span<const int32_t> held,
                                               std::span<const int32_t> prompt, size_t common,
                                               int64_t min_kept) {
  if (common >= held.size() || common >= prompt.size()) return std::nullopt;
  const std::span<const int32_t> rest = prompt.subspan(common);
  std::optional<ContextShift> best;
  int candidates = 0;
  for (size_t to = common + 1; to < held.size(); ++to) {
    const size_t left = held.size() - to;
    if (static_cast<int64_t>(left) < min_kept || (best && left <= static_cast<size_t>(best->kept)))
      break;  // later places cannot keep more
    if (held[to] != rest[0]) continue;
    if (++candidates > kMaxShiftCandidates) break;
    const size_t n = std::min(left, rest.size());
    const size_t kept = static_cast<size_t>(
        std::mismatch(held.begin() + static_cast<std::ptrdiff_t>(to),
                      held.begin() + static_cast<std::ptrdiff_t>(to + n), rest.begin())
            .first -
        (held.begin() + static_cast<std::ptrdiff_t>(to)));
    if (static_cast<int64_t>(kept) >= min_kept && (!best || kept > static_cast<size_t>(best->kept)))
      best = ContextShift{static_cast<int64_t>(common), static_cast<int64_t>(to),
                          static_cast<int64_t>(kept)};
    if (kept == left) break;  // all the rest of held: nothing keeps more
  }
  return best;
}

PagedKvCache::KeyRotation key_rotation(const Rope& rope, int head_dim) {
  return [&rope, head_dim](float* keys, int64_t n, int64_t delta) {
    std::vector<float> cos(static_cast<size_t>(rope.half())), sin(cos.size());
    rope.tables(-delta, 1, cos.data(), sin.data());
    for (int64_t r = 0; r < n; ++r)
      rope.apply(keys + r * head_dim, 1, 1, head_dim, cos.data(), sin.data());
  };
}

}  // namespace tangram
