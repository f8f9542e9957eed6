// The request-rate sweep of `tangram bench --rates`: the same workload arriving open loop
// (Poisson, new conversations per second) at each rate, under full KV and under tangram, so the
// report can show TTFT against load: where full KV saturates (its queue grows), tangram's
// smaller footprint keeps more conversations resident and admitted.
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

struct RateSweepPoint {
  std::string policy;
  double rate = 0;  // offered: new conversations per second
  RunMetrics metrics;
  bool saturated = false;  // TTFT p99 more than twice its value at the lowest rate
};

struct RateSweep {
  std::vector<RateSweepPoint> points;  // policy-major, rates ascending
  std::string verdict;                 // the TTFT target, stated plainly
};

// Runs every (policy, rate). `policies` pairs a name with the scheduler options to run it with.
Result<RateSweep> run_rate_sweep(
    Model& model, const Tokenizer& tok, ThreadPool& pool, const WorkloadSpec& spec,
    std::vector<double> rates,
    const std::vector<std::pair<std::string, SchedulerOptions>>& policies);

// TTFT p50 and p99 against the rate, one series per policy and percentile.
LinePlot rate_sweep_plot(const RateSweep& sweep);
nlohmann::json rate_sweep_json(const RateSweep& sweep);

}  // namespace tangram::bench
