#include "server/context_fit.h"

#include <algorithm>

namespace tangram::server {

std::vector<size_t> cut_points(const std::vector<ChatMessage>& messages) {
  std::vector<size_t> cuts = {0};
  size_t last_user = 0;  // among the non-system messages
  size_t n = 0;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") continue;
    if (m.role == "user") last_user = n;
    ++n;
  }
  n = 0;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") continue;
    if (m.role == "user" && n > 0 && n <= last_user) cuts.push_back(n);
    ++n;
  }
  return cuts;
}

std::vector<ChatMessage> drop_oldest(const std::vector<ChatMessage>& messages, size_t drop) {
  std::vector<ChatMessage> out;
  size_t seen = 0;
  for (const ChatMessage& m : messages) {
    if (m.role != "system" && seen++ < drop) continue;
    out.push_back(m);
  }
  return out;
}

namespace {

// The first index i in [lo, cuts.size()) whose cut takes at most `limit` tokens (tokens fall as
// the cut deepens), or cuts.size().
size_t first_within(const std::vector<size_t>& cuts, size_t lo, int64_t limit,
                    const ContextFitProbe& probe) {
  size_t hi = cuts.size();
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (probe.tokens(cuts[mid]) <= limit)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

}  // namespace

std::optional<size_t> fit_to_context(const std::vector<ChatMessage>& messages, int64_t budget,
                                     int64_t deep_budget, const ContextFitProbe& probe,
                                     size_t max_probes) {
  if (probe.tokens(0) <= budget) return size_t{0};
  const std::vector<size_t> cuts = cut_points(messages);
  const size_t fits = first_within(cuts, 1, budget, probe);
  if (fits == cuts.size()) return std::nullopt;
  const size_t deep =
      std::max(fits, first_within(cuts, fits, std::min(deep_budget, budget), probe));
  // A cut made on an earlier turn, which this prompt's history still holds: keep it.
  for (size_t i = fits; i < cuts.size() && i - fits < max_probes; ++i)
    if (probe.continues(cuts[i])) return cuts[i];
  return cuts[std::min(deep, cuts.size() - 1)];
}

}  // namespace tangram::server
