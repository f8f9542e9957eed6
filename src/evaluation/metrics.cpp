#include "evaluation/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

namespace tangram {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// NaNs removed, then sorted ascending (a NaN would break the sort's ordering contract).
std::vector<double> sorted_numbers(std::vector<double> values) {
  std::erase_if(values, [](double v) { return std::isnan(v); });
  std::sort(values.begin(), values.end());
  return values;
}

// Linear interpolation between closest ranks; sorted is non-empty and ascending.
double percentile_of_sorted(const std::vector<double>& sorted, double p) {
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + frac * (sorted[hi] - sorted[lo]);
}

bool all_finite(std::initializer_list<double> values) {
  return std::all_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); });
}

Status check_record(const RequestRecord& r) {
  if (!all_finite({r.submit_s, r.finish_s, r.queue_s}) ||
      (r.output_tokens > 0 && !std::isfinite(r.first_token_s)))
    return make_error("times must be finite");
  if (r.output_tokens > 0 && !(r.submit_s <= r.first_token_s && r.first_token_s <= r.finish_s))
    return make_error("times out of order: submit {} first_token {} finish {}", r.submit_s,
                      r.first_token_s, r.finish_s);
  if (!(r.submit_s <= r.finish_s))
    return make_error("finish {} before submit {}", r.finish_s, r.submit_s);
  if (r.queue_s < 0.0) return make_error("negative queue time {}", r.queue_s);
  if (r.prompt_tokens < 0 || r.cached_tokens < 0 || r.output_tokens < 0 ||
      r.recomputed_tokens < 0 || r.restored_tokens < 0 || r.preemptions < 0)
    return make_error("negative token or preemption count");
  if (r.cached_tokens > r.prompt_tokens)
    return make_error("cached_tokens {} exceed prompt_tokens {}", r.cached_tokens, r.prompt_tokens);
  if (r.restored_tokens > r.cached_tokens)
    return make_error("restored_tokens {} exceed cached_tokens {}", r.restored_tokens,
                      r.cached_tokens);
  return Status::Ok();
}

}  // namespace

double percentile(std::vector<double> values, double p) {
  if (std::isnan(p)) return kNaN;
  const std::vector<double> sorted = sorted_numbers(std::move(values));
  if (sorted.empty()) return kNaN;
  return percentile_of_sorted(sorted, p);
}

LatencySummary summarize(std::vector<double> values) {
  const std::vector<double> sorted = sorted_numbers(std::move(values));
  LatencySummary s;
  s.n = sorted.size();
  if (sorted.empty()) {
    s.mean = s.p50 = s.p90 = s.p99 = s.max = kNaN;
    return s;
  }
  double sum = 0.0;
  for (const double v : sorted) sum += v;
  s.mean = sum / static_cast<double>(sorted.size());
  s.p50 = percentile_of_sorted(sorted, 50.0);
  s.p90 = percentile_of_sorted(sorted, 90.0);
  s.p99 = percentile_of_sorted(sorted, 99.0);
  s.max = sorted.back();
  return s;
}

double FollowupSources::share(int64_t count) const {
  return total() > 0 ? static_cast<double>(count) / static_cast<double>(total()) : kNaN;
}

FollowupSources classify_followups(std::span<const RequestRecord> records) {
  FollowupSources f;
  for (const RequestRecord& r : records) {
    if (r.error || r.turn < 1) continue;
    if (r.restored_tokens > 0)
      ++f.restored;
    else if (r.cached_tokens > 0)
      ++f.resident;
    else
      ++f.recomputed;
  }
  return f;
}

Result<RunMetrics> compute_run_metrics(std::span<const RequestRecord> records, double wall_s) {
  if (!(std::isfinite(wall_s) && wall_s > 0.0))
    return make_error("run metrics: wall time must be finite and > 0 (got {})", wall_s);
  RunMetrics m;
  m.wall_s = wall_s;
  m.requests = records.size();
  std::vector<double> ttft, tpot, e2e, queue;  // [completed requests] each, at most
  for (size_t i = 0; i < records.size(); ++i) {
    const RequestRecord& r = records[i];
    if (r.error) {
      ++m.errors;
      continue;
    }
    if (Status s = check_record(r); !s.ok())
      return make_error("run metrics: record {} (session '{}', turn {}): {}", i, r.session, r.turn,
                        s.message());
    ++m.completed;
    if (r.output_tokens >= 1) ttft.push_back(r.first_token_s - r.submit_s);
    if (r.output_tokens >= 2)
      tpot.push_back((r.finish_s - r.first_token_s) / static_cast<double>(r.output_tokens - 1));
    e2e.push_back(r.finish_s - r.submit_s);
    queue.push_back(r.queue_s);
    m.prompt_tokens += r.prompt_tokens;
    m.cached_tokens += r.cached_tokens;
    m.output_tokens += r.output_tokens;
    m.recomputed_tokens += r.recomputed_tokens;
    m.restored_tokens += r.restored_tokens;
    m.preemptions += r.preemptions;
  }
  m.followups = classify_followups(records);
  m.requests_per_s = static_cast<double>(m.completed) / wall_s;
  m.output_tokens_per_s = static_cast<double>(m.output_tokens) / wall_s;
  m.ttft_s = summarize(std::move(ttft));
  m.tpot_s = summarize(std::move(tpot));
  m.e2e_s = summarize(std::move(e2e));
  m.queue_s = summarize(std::move(queue));
  m.cached_fraction = m.prompt_tokens > 0 ? static_cast<double>(m.cached_tokens) /
                                                static_cast<double>(m.prompt_tokens)
                                          : kNaN;
  return m;
}

TimeSeries downsample(const TimeSeries& series, size_t max_points, Downsample mode) {
  const size_t n = series.size();
  TimeSeries out;
  if (max_points == 0) return out;
  if (n <= max_points) {
    out.t.assign(series.t.begin(), series.t.begin() + static_cast<std::ptrdiff_t>(n));
    out.value.assign(series.value.begin(), series.value.begin() + static_cast<std::ptrdiff_t>(n));
    return out;
  }
  out.t.reserve(max_points);
  out.value.reserve(max_points);
  for (size_t b = 0; b < max_points; ++b) {
    // Bucket b holds samples [begin, end): near-equal counts, none empty since n > max_points.
    const size_t begin = b * n / max_points;
    const size_t end = (b + 1) * n / max_points;
    double t_sum = 0.0, v_sum = 0.0, v_max = -std::numeric_limits<double>::infinity();
    for (size_t k = begin; k < end; ++k) {
      t_sum += series.t[k];
      v_sum += series.value[k];
      v_max = std::max(v_max, series.value[k]);
    }
    const double count = static_cast<double>(end - begin);
    out.add(t_sum / count, mode == Downsample::Max ? v_max : v_sum / count);
  }
  return out;
}

// nlohmann dumps non-finite doubles as null, which is what an empty summary should read as.
void to_json(nlohmann::json& j, const LatencySummary& s) {
  j = nlohmann::json{{"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90},
                     {"p99", s.p99},   {"max", s.max}, {"n", s.n}};
}

void to_json(nlohmann::json& j, const RunMetrics& m) {
  j = nlohmann::json{{"wall_s", m.wall_s},
                     {"requests", m.requests},
                     {"completed", m.completed},
                     {"errors", m.errors},
                     {"requests_per_s", m.requests_per_s},
                     {"output_tokens_per_s", m.output_tokens_per_s},
                     {"ttft_s", m.ttft_s},
                     {"tpot_s", m.tpot_s},
                     {"e2e_s", m.e2e_s},
                     {"queue_s", m.queue_s},
                     {"prompt_tokens", m.prompt_tokens},
                     {"cached_tokens", m.cached_tokens},
                     {"output_tokens", m.output_tokens},
                     {"recomputed_tokens", m.recomputed_tokens},
                     {"preemptions", m.preemptions},
                     {"cached_fraction", m.cached_fraction},
                     {"restored_tokens", m.restored_tokens},
                     {"followups", m.followups}};
}

void to_json(nlohmann::json& j, const FollowupSources& f) {
  j = nlohmann::json{{"resident", f.resident},
                     {"restored", f.restored},
                     {"recomputed", f.recomputed},
                     {"resident_share", f.share(f.resident)},
                     {"restored_share", f.share(f.restored)},
                     {"recomputed_share", f.share(f.recomputed)}};
}

void to_json(nlohmann::json& j, const TimeSeries& s) {
  const auto n = static_cast<std::ptrdiff_t>(s.size());
  j = nlohmann::json{{"t", std::vector<double>(s.t.begin(), s.t.begin() + n)},
                     {"value", std::vector<double>(s.value.begin(), s.value.begin() + n)}};
}

}  // namespace tangram
