// Latency and throughput statistics for `tangram bench`: percentiles, per-run summaries from
// per-request records, and time series sampled during a run (for plots).
//
// Conventions (stated once, relied on by the report):
//  - percentile: linear interpolation between closest ranks over the sorted values (numpy's
//    default, "type 7"): rank = p / 100 x (n - 1), value = v[floor] + frac(rank) x (v[ceil] -
//    v[floor]). For {1, ..., 10}: p50 = 5.5, p90 = 9.1, p99 = 9.91.
//  - Statistics of nothing are NaN (written as null in JSON), never 0, so an empty set cannot pass
//    for a fast one. NaN inputs are ignored.
//  - All times are seconds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"

namespace tangram {

// The p-th percentile (p clamped to [0, 100]) of values; NaN if values holds no number.
double percentile(std::vector<double> values, double p);

struct LatencySummary {
  double mean = 0.0, p50 = 0.0, p90 = 0.0, p99 = 0.0, max = 0.0;  // NaN when n == 0
  size_t n = 0;                                                   // values summarised
};
LatencySummary summarize(std::vector<double> values);

// One request (one turn of one session) as the runner saw it. Times are seconds on one clock.
struct RequestRecord {
  std::string session;
  int turn = 0;
  double submit_s = 0.0;       // handed to the engine
  double first_token_s = 0.0;  // first output token available
  double finish_s = 0.0;       // last output token available
  double queue_s = 0.0;        // waiting for admission (part of submit..first_token)
  int64_t prompt_tokens = 0;   // tokens of context the request needed (history + new message)
  int64_t cached_tokens = 0;   // of prompt_tokens, served from a kept session (not prefilled)
  int64_t output_tokens = 0;
  int64_t recomputed_tokens = 0;  // prefilled again after eviction or preemption
  int preemptions = 0;
  bool error = false;  // failed requests count only in `errors`: their partial figures mislead
  int64_t restored_tokens = 0;  // of cached_tokens, brought back from a tier (host, disk, Redis)
};

// Where the follow-up turns (turn >= 1) of completed requests found their conversation's history
// when first admitted: still resident in the KV pool, restored from a tier, or nowhere (the
// whole history prefilled again). A turn is restored when any of its cached tokens came from a
// tier, else resident when any were cached, else recomputed. Recomputation after a preemption
// is not counted here (RunMetrics::recomputed_tokens and preemptions carry it).
struct FollowupSources {
  int64_t resident = 0, restored = 0, recomputed = 0;
  int64_t total() const { return resident + restored + recomputed; }
  // count / total(); NaN with no follow-up turns.
  double share(int64_t count) const;
};
FollowupSources classify_followups(std::span<const RequestRecord> records);

struct RunMetrics {
  double wall_s = 0.0;
  size_t requests = 0;   // records given
  size_t completed = 0;  // records without error
  size_t errors = 0;
  double requests_per_s = 0.0;       // completed / wall_s
  double output_tokens_per_s = 0.0;  // output tokens of completed requests / wall_s
  LatencySummary ttft_s;             // first_token - submit, requests with output_tokens >= 1
  LatencySummary tpot_s;  // (finish - first_token) / (output_tokens - 1), output_tokens >= 2
  LatencySummary e2e_s;   // finish - submit
  LatencySummary queue_s;
  // Totals over completed requests.
  int64_t prompt_tokens = 0, cached_tokens = 0, output_tokens = 0, recomputed_tokens = 0;
  int64_t preemptions = 0;
  double cached_fraction = 0.0;  // cached_tokens / prompt_tokens; NaN with no prompt tokens
  int64_t restored_tokens = 0;
  FollowupSources followups;
};

// Errors: wall_s not finite and > 0; a completed record with non-finite times, times out of order
// (submit <= first_token <= finish), negative queue time or counts, cached > prompt tokens, or
// restored > cached tokens.
Result<RunMetrics> compute_run_metrics(std::span<const RequestRecord> records, double wall_s);

// A quantity sampled over a run (KV slots in use, admitted concurrency, ...), t in seconds.
struct TimeSeries {
  std::vector<double> t;      // [n], expected non-decreasing
  std::vector<double> value;  // [n]
  void add(double time_s, double v) {
    t.push_back(time_s);
    value.push_back(v);
  }
  size_t size() const { return t.size() < value.size() ? t.size() : value.size(); }
};

enum class Downsample {
  Mean,  // each bucket becomes its mean time and mean value
  Max,   // each bucket becomes its mean time and largest value (keeps peaks, e.g. memory)
};
// At most max_points points: consecutive samples are split into max_points buckets of near-equal
// count and each reduced to one point. A series already small enough is returned unchanged;
// max_points == 0 gives an empty series.
TimeSeries downsample(const TimeSeries& series, size_t max_points,
                      Downsample mode = Downsample::Mean);

// nlohmann conversions for the report file (`nlohmann::json j = metrics;`); NaN becomes null.
void to_json(nlohmann::json& j, const LatencySummary& s);
void to_json(nlohmann::json& j, const FollowupSources& f);
void to_json(nlohmann::json& j, const RunMetrics& m);
void to_json(nlohmann::json& j, const TimeSeries& s);

}  // namespace tangram
