// Equal-memory comparison of KV policies: a policy can look faster than another at the same
// nominal ratio by keeping more, so every "x other policy" figure is also given against the other
// policy at the same effective retention (a run's KV bytes per cached token over full KV's).
//
// The other policy's throughput at a retention is interpolated linearly between its two runs that
// bracket it (their effective retentions), or taken from its run of nearest retention when none
// bracket it (one run, or the retention lies outside the runs'): that pair is not at equal
// memory, and says so with the retention it was at.
#pragma once

#include <optional>
#include <span>
#include <string>

namespace tangram {

// One run as the pairing sees it.
struct RetentionPoint {
  std::string policy;
  double ratio = 1.0;         // nominal retention ratio (--kv-ratio)
  double retention = 1.0;     // effective: KV bytes per cached token / full KV's
  double tokens_per_s = 0.0;  // output tokens/s
};

// A run against another policy at (or nearest to) its effective retention.
struct EqualRetentionPair {
  std::string other_policy;
  double retention = 0.0;  // the run's effective retention
  double other_retention =
      0.0;  // where the other policy's figure is from (== retention when interpolated)
  double other_tokens_per_s = 0.0;  // the other policy's output tokens/s there
  bool interpolated = false;        // between two of its runs that bracket `retention`
  // The two runs interpolated between (interpolated only; both the nearest run otherwise).
  RetentionPoint below, above;
  double speedup = 0.0;  // run's tokens/s over other_tokens_per_s (0 when that is 0)
  // True when the other figure is at the run's retention: interpolated, or a run within
  // `tolerance`.
  bool equal_memory(double tolerance = 0.02) const;
};

// `run` against the runs of `other_policy` among `runs` (its own policy's runs are ignored, so
// `runs` may be every run). nullopt when that policy has no run with a finite retention > 0.
std::optional<EqualRetentionPair> pair_at_equal_retention(const RetentionPoint& run,
                                                          std::span<const RetentionPoint> runs,
                                                          const std::string& other_policy);

}  // namespace tangram
