// The request-rate sweep of `tangram bench --rates`: the same workload arriving open loop
// (Poisson, new conversations per second) at each rate, under every run of the benchmark, so the
// report can show TTFT against load and each run's capacity: the goodput, the highest rate it
// sustains with its TTFT p90 within a stated limit (--ttft-limit). Where full KV saturates (its
// queue grows), a smaller footprint keeps more conversations resident and admitted.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/svg_plot.h"
#include "common/thread_pool.h"
#include "evaluation/metrics.h"
#include "evaluation/workload.h"
#include "model/model.h"
#include "scheduler/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace tangram::bench {

// One run of the sweep's: a (policy, ratio, group size) of the benchmark's plans.
struct SweptPolicy {
  std::string policy;
  double ratio = 1.0;
  int group_size = 0;
  SchedulerOptions options;
};

struct RateSweepPoint {
  std::string policy;
  double ratio = 1.0;
  int group_size = 0;
  double rate = 0;  // offered: new conversations per second
  RunMetrics metrics;
  bool saturated = false;  // TTFT p99 more than twice its value at the lowest rate
};

// What a run sustains: the highest swept rate at which it, and every lower rate, kept its TTFT p90
// within the limit, and the output tokens/s it served there.
struct Goodput {
  std::string policy;
  double ratio = 1.0;
  int group_size = 0;
  double rate = 0;                 // 0: not even the lowest rate
  double output_tokens_per_s = 0;  // at that rate (0 when none)
  double ttft_p90_s = 0;           // at that rate
};

struct RateSweep {
  std::vector<RateSweepPoint> points;  // run-major, rates ascending
  double ttft_limit_s = 0;
  std::vector<Goodput> goodput;  // one per run, in the runs' order
  std::string verdict;           // the TTFT target, stated plainly
};

// Every run at every rate, then each run's goodput within ttft_limit_s.
Result<RateSweep> run_rate_sweep(Model& model, const Tokenizer& tok, ThreadPool& pool,
                                 const WorkloadSpec& spec, std::vector<double> rates,
                                 const std::vector<SweptPolicy>& runs, double ttft_limit_s);

// The goodput of every run in `points` (run-major, rates ascending), in order of first appearance.
std::vector<Goodput> goodput_of(const std::vector<RateSweepPoint>& points, double ttft_limit_s);

// "full", "tangram 0.25", "tangram 0.25 G=8": a run's name in tables and legends.
std::string run_label(const std::string& policy, double ratio, int group_size);

// TTFT p90 against the rate, one series per run, and the limit.
LinePlot rate_sweep_plot(const RateSweep& sweep);
nlohmann::json rate_sweep_json(const RateSweep& sweep);
// {"ttft_p90_limit_s", "runs": [{policy, ratio, group_size, rate, output_tokens_per_s, ...}]}
nlohmann::json goodput_json(const RateSweep& sweep);

}  // namespace tangram::bench
