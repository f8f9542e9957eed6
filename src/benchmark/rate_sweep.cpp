#include "benchmark/rate_sweep.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/progress.h"
#include "common/svg_plot.h"
#include "evaluation/runner.h"

namespace tangram::bench {

std::vector<Goodput> goodput_of(const std::vector<RateSweepPoint>& points, double ttft_limit_s) {
  std::vector<Goodput> out;
  std::vector<bool> broken;  // a lower rate of the run already missed the limit
  for (const RateSweepPoint& p : points) {
    auto it = std::find_if(out.begin(), out.end(), [&](const Goodput& g) {
      return g.policy == p.policy && g.ratio == p.ratio && g.group_size == p.group_size;
    });
    if (it == out.end()) {
      out.push_back({p.policy, p.ratio, p.group_size, 0, 0, 0});
      broken.push_back(false);
      it = out.end() - 1;
    }
    const size_t i = static_cast<size_t>(it - out.begin());
    if (broken[i]) continue;
    if (p.metrics.ttft_s.p90 <= ttft_limit_s) {
      it->rate = p.rate;
      it->output_tokens_per_s = p.metrics.output_tokens_per_s;
      it->ttft_p90_s = p.metrics.ttft_s.p90;
    } else {
      broken[i] = true;
    }
  }
  return out;
}

Result<RateSweep> run_rate_sweep(Model& model, const Tokenizer& tok, ThreadPool& pool,
                                 const WorkloadSpec& spec, std::vector<double> rates,
                                 const std::vector<SweptPolicy>& runs, double ttft_limit_s) {
  if (!(ttft_limit_s > 0)) return make_error("--ttft-limit must be a positive number of seconds");
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
  ProgressBar bar("rate sweep", static_cast<int64_t>(runs.size() * rates.size()) * turns);
  int64_t done = 0;
  for (const SweptPolicy& run_of : runs) {
    double lowest_p99 = 0;
    for (size_t i = 0; i < rates.size(); ++i) {
      WorkloadSpec rs = spec;
      rs.arrival = WorkloadSpec::Arrival::OpenLoop;
      rs.request_rate = rates[i];
      auto run = run_workload(model, tok, pool, run_of.options, workloads[i], rs,
                              [&](int64_t d, int64_t) { bar.update(done + d); });
      if (!run)
        return make_error("{} at {} conversations/s: {}", run_of.policy, rates[i], run.message());
      done += turns;
      TG_ASSIGN(RunMetrics m, compute_run_metrics(run->records, run->wall_s));
      // Saturation: TTFT p99 more than doubles from the lowest rate (the queue builds up).
      if (i == 0) lowest_p99 = m.ttft_s.p99;
      const bool saturated = i > 0 && m.ttft_s.p99 > 2.0 * lowest_p99;
      sweep.points.push_back(
          {run_of.policy, run_of.ratio, run_of.group_size, rates[i], m, saturated});
    }
  }
  bar.finish();
  sweep.ttft_limit_s = ttft_limit_s;
  sweep.goodput = goodput_of(sweep.points, ttft_limit_s);
  // The TTFT target compares full with the first tangram run swept.
  const RateSweepPoint* first_tangram = nullptr;
  for (const auto& p : sweep.points)
    if (p.policy == "tangram" && first_tangram == nullptr) first_tangram = &p;
  const auto find = [&](const std::string& policy, double rate) -> const RateSweepPoint* {
    for (const auto& p : sweep.points)
      if (p.policy == policy && p.rate == rate &&
          (policy != "tangram" ||
           (p.ratio == first_tangram->ratio && p.group_size == first_tangram->group_size)))
        return &p;
    return nullptr;
  };
  int saturated = 0, below = 0;
  for (double r : rates) {
    const RateSweepPoint* f = find("full", r);
    const RateSweepPoint* t = first_tangram ? find("tangram", r) : nullptr;
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

std::string run_label(const std::string& policy, double ratio, int group_size) {
  if (policy == "full") return policy;
  return group_size > 0 ? fmt::format("{} {:g} G={}", policy, ratio, group_size)
                        : fmt::format("{} {:g}", policy, ratio);
}

LinePlot rate_sweep_plot(const RateSweep& sweep) {
  LinePlot p;
  p.title = "TTFT p90 vs request rate (goodput: the highest rate under the limit)";
  p.x_label = "new conversations per second (Poisson arrivals)";
  p.y_label = "TTFT p90 (s)";
  std::vector<NamedPoint> points;
  double lo = 0, hi = 0;
  for (const auto& pt : sweep.points) {
    points.push_back(
        {run_label(pt.policy, pt.ratio, pt.group_size), pt.rate, pt.metrics.ttft_s.p90});
    lo = lo == 0 ? pt.rate : std::min(lo, pt.rate);
    hi = std::max(hi, pt.rate);
  }
  p.series = series_by_name(points);
  p.series.push_back({fmt::format("TTFT limit {:g} s", sweep.ttft_limit_s),
                      {lo, hi},
                      {sweep.ttft_limit_s, sweep.ttft_limit_s}});
  return p;
}

nlohmann::json goodput_json(const RateSweep& sweep) {
  nlohmann::json runs = nlohmann::json::array();
  for (const Goodput& g : sweep.goodput)
    runs.push_back({{"policy", g.policy},
                    {"ratio", g.ratio},
                    {"group_size", g.group_size},
                    {"rate", g.rate},
                    {"output_tokens_per_s", g.output_tokens_per_s},
                    {"ttft_p90_s", g.ttft_p90_s}});
  return {{"ttft_p90_limit_s", sweep.ttft_limit_s}, {"runs", runs}};
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
         {"ratio", p.ratio},
         {"group_size", p.group_size},
         {"ttft_s", {{"p50", m.ttft_s.p50}, {"p90", m.ttft_s.p90}, {"p99", m.ttft_s.p99}}},
         {"queue_s", {{"p50", m.queue_s.p50}, {"p90", m.queue_s.p90}, {"p99", m.queue_s.p99}}},
         {"e2e_s", {{"p50", m.e2e_s.p50}, {"p99", m.e2e_s.p99}}},
         {"preemptions", m.preemptions}});
  }
  return j;
}

}  // namespace tangram::bench
