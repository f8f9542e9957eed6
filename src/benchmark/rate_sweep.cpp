#include "benchmark/rate_sweep.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "common/progress.h"
#include "common/svg_plot.h"
#include "evaluation/runner.h"

namespace tangram::bench {

Result<RateSweep> run_rate_sweep(
    Model& model, const Tokenizer& tok, ThreadPool& pool, const WorkloadSpec& spec,
    std::vector<double> rates,
    const std::vector<std::pair<std::string, SchedulerOptions>>& policies) {
  std::sort(rates.begin(), rates.end());
  rates.erase(std::unique(rates.begin(), rates.end()), rates.end());
  for (double r : rates)
    if (!(r > 0))
      return make_error(
          "--rates: every rate must be a positive number of conversations per second");
  // The same conversations (same seed) at every rate: only their arrival times differ.
  std::vector<std::vector<Conversation>> workloads;
  int64_t turns = 0;
  for (double r : rates) {
    WorkloadSpec rs = spec;
    rs.arrival = WorkloadSpec::Arrival::OpenLoop;
    rs.request_rate = r;
    TG_ASSIGN(std::vector<Conversation> w, generate_workload(rs));
    turns = 0;
    for (const auto& c : w) turns += static_cast<int64_t>(c.turns.size());
    workloads.push_back(std::move(w));
  }
  RateSweep sweep;
  ProgressBar bar("rate sweep", static_cast<int64_t>(policies.size() * rates.size()) * turns);
  int64_t done = 0;
  for (const auto& [name, options] : policies) {
    for (size_t i = 0; i < rates.size(); ++i) {
      WorkloadSpec rs = spec;
      rs.arrival = WorkloadSpec::Arrival::OpenLoop;
      rs.request_rate = rates[i];
      auto run = run_workload(model, tok, pool, options, workloads[i], rs,
                              [&](int64_t d, int64_t) { bar.update(done + d); });
      if (!run) return make_error("{} at {} conversations/s: {}", name, rates[i], run.message());
      done += turns;
      TG_ASSIGN(RunMetrics m, compute_run_metrics(run->records, run->wall_s));
      sweep.points.push_back({name, rates[i], m, false});
    }
  }
  bar.finish();
  // Saturation: a policy's TTFT p99 more than doubles from the lowest rate (its queue builds up).
  std::map<std::string, double> base;
  for (auto& p : sweep.points) {
    auto [it, first] = base.emplace(p.policy, p.metrics.ttft_s.p99);
    p.saturated = !first && p.metrics.ttft_s.p99 > 2.0 * it->second;
  }
  const auto find = [&](const std::string& policy, double rate) -> const RateSweepPoint* {
    for (const auto& p : sweep.points)
      if (p.policy == policy && p.rate == rate) return &p;
    return nullptr;
  };
  int saturated = 0, below = 0;
  for (double r : rates) {
    const RateSweepPoint* f = find("full", r);
    const RateSweepPoint* t = find("tangram", r);
    if (f == nullptr || t == nullptr || !f->saturated) continue;
    ++saturated;
    if (t->metrics.ttft_s.p99 < f->metrics.ttft_s.p99) ++below;
  }
  if (saturated == 0)
    sweep.verdict =
        "TTFT vs rate: full KV did not saturate at the rates given (its TTFT p99 never doubled); "
        "give higher --rates to test the TTFT target";
  else
    sweep.verdict = fmt::format(
        "TTFT vs rate: full KV saturates at {} of {} rates; tangram's TTFT p99 is below full's at "
        "{} of them (target: all: {})",
        saturated, rates.size(), below, below == saturated ? "met" : "NOT met");
  return sweep;
}

LinePlot rate_sweep_plot(const RateSweep& sweep) {
  LinePlot p;
  p.title = "Time to first token vs request rate";
  p.x_label = "new conversations per second (Poisson arrivals)";
  p.y_label = "TTFT (s)";
  std::map<std::string, std::pair<PlotSeries, PlotSeries>> by_policy;
  std::vector<std::string> order;
  for (const auto& pt : sweep.points) {
    auto [it, added] = by_policy.try_emplace(pt.policy, PlotSeries{pt.policy + " p99", {}, {}},
                                             PlotSeries{pt.policy + " p50", {}, {}});
    if (added) order.push_back(pt.policy);
    it->second.first.x.push_back(pt.rate);
    it->second.first.y.push_back(pt.metrics.ttft_s.p99);
    it->second.second.x.push_back(pt.rate);
    it->second.second.y.push_back(pt.metrics.ttft_s.p50);
  }
  for (const auto& name : order) {
    p.series.push_back(by_policy[name].first);
    p.series.push_back(by_policy[name].second);
  }
  return p;
}

nlohmann::json rate_sweep_json(const RateSweep& sweep) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& p : sweep.points) {
    const RunMetrics& m = p.metrics;
    j.push_back(
        {{"policy", p.policy},
         {"rate", p.rate},
         {"saturated", p.saturated},
         {"wall_s", m.wall_s},
         {"requests", m.requests},
         {"requests_per_s", m.requests_per_s},
         {"output_tokens_per_s", m.output_tokens_per_s},
         {"ttft_s", {{"p50", m.ttft_s.p50}, {"p90", m.ttft_s.p90}, {"p99", m.ttft_s.p99}}},
         {"queue_s", {{"p50", m.queue_s.p50}, {"p90", m.queue_s.p90}, {"p99", m.queue_s.p99}}},
         {"e2e_s", {{"p50", m.e2e_s.p50}, {"p99", m.e2e_s.p99}}},
         {"preemptions", m.preemptions}});
  }
  return j;
}

}  // namespace tangram::bench
