// The service and equal-memory part of `tangram bench`'s report: where each run's follow-up turns
// found their conversation's history (resident, restored from a tier, recomputed), how busy the
// engine was, and every "x full" / "x dynamic" also against the other policy at the run's
// effective retention (evaluation/equal_retention.h), so a policy cannot win by keeping more.
#include <cmath>

#include <fmt/format.h>

#include "benchmark/multiturn.h"
#include "evaluation/equal_retention.h"

namespace tangram::bench {

using nlohmann::json;

namespace {

// Every run with its effective retention: KV bytes per cached token over full KV's (NaN without
// a full run to divide by).
std::vector<RetentionPoint> retention_points(const MultiturnResults& r) {
  const RunRow* full = full_run(r.rows);
  const double full_bytes = full ? full->run.kv_bytes_per_cached_token : 0.0;
  std::vector<RetentionPoint> points;
  for (const RunRow& row : r.rows)
    points.push_back(
        {row.policy, row.ratio,
         full_bytes > 0 ? row.run.kv_bytes_per_cached_token / full_bytes : std::nan(""),
         row.metrics.output_tokens_per_s});
  return points;
}

// The other policy's run at the same nominal ratio (nullptr when it did not run there).
const RunRow* same_ratio_run(const MultiturnResults& r, const std::string& policy, double ratio) {
  for (const RunRow& row : r.rows)
    if (row.policy == policy && (policy == "full" || std::abs(row.ratio - ratio) < 1e-9))
      return &row;
  return nullptr;
}

double ratio_of(double a, double b) { return b > 0 ? a / b : std::nan(""); }

std::string times_cell(double x) { return std::isfinite(x) ? fmt::format("{:.2f}x", x) : "-"; }

// "1.23x (interp. 0.24-0.37)" (the bracketing runs' retentions) / "1.23x (at 0.31, not equal)" /
// "-".
std::string pair_cell(const std::optional<EqualRetentionPair>& p) {
  if (!p || !(p->other_tokens_per_s > 0)) return "-";
  if (p->interpolated)
    return fmt::format("{:.2f}x (interp. {:.2f}-{:.2f})", p->speedup, p->below.retention,
                       p->above.retention);
  return fmt::format("{:.2f}x (at {:.2f}{})", p->speedup, p->other_retention,
                     p->equal_memory() ? "" : ", not equal");
}

std::string share_cell(const FollowupSources& f, int64_t n) {
  return f.total() > 0 ? fmt::format("{:.0f}%", 100.0 * f.share(n)) : "-";
}

// One run's row of the service table, as cells.
struct ServiceRow {
  const RunRow* row = nullptr;
  double retention = 0;
  double busy_share = 0;  // engine busy time over the run's clock
  double x_full = 0, x_dynamic = 0;
  std::optional<EqualRetentionPair> vs_dynamic;
};

std::vector<ServiceRow> service_rows(const MultiturnResults& r) {
  const std::vector<RetentionPoint> points = retention_points(r);
  std::vector<ServiceRow> rows;
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const RunRow& row = r.rows[i];
    ServiceRow s;
    s.row = &row;
    s.retention = points[i].retention;
    s.busy_share = row.run.wall_s > 0 ? row.run.busy_s / row.run.wall_s : std::nan("");
    const RunRow* full = full_run(r.rows);
    const RunRow* dynamic = same_ratio_run(r, "dynamic", row.ratio);
    s.x_full = full ? ratio_of(row.metrics.output_tokens_per_s, full->metrics.output_tokens_per_s)
                    : std::nan("");
    s.x_dynamic =
        dynamic && row.policy != "dynamic"
            ? ratio_of(row.metrics.output_tokens_per_s, dynamic->metrics.output_tokens_per_s)
            : std::nan("");
    if (std::isfinite(s.retention) && row.policy != "dynamic" && row.policy != "full")
      s.vs_dynamic = pair_at_equal_retention(points[i], points, "dynamic");
    rows.push_back(std::move(s));
  }
  return rows;
}

}  // namespace

void print_service_table(const MultiturnResults& r, std::FILE* console) {
  fmt::print(console,
             "\nfollow-up turns and equal memory (retention: KV bytes per cached token / full's; x "
             "dynamic at equal "
             "retention interpolates dynamic's runs):\n{:<8} {:>5} {:>9} {:>9} {:>6} {:>9} {:>9} "
             "{:>10} {:>10} {:>10} "
             "{:>8} {:>10} {:>26}\n",
             "policy", "ratio", "retention", "out tok/s", "busy", "resident", "restored",
             "recomputed", "TTFT p50", "TTFT p99", "x full", "x dynamic",
             "x dynamic at equal retention");
  for (const ServiceRow& s : service_rows(r)) {
    const RunRow& row = *s.row;
    const FollowupSources& f = row.metrics.followups;
    fmt::print(console,
               "{:<8} {:>5.2f} {:>9.3f} {:>9.2f} {:>5.0f}% {:>9} {:>9} {:>10} {:>10} {:>10} {:>8} "
               "{:>10} {:>26}\n",
               row.policy, row.ratio, s.retention, row.metrics.output_tokens_per_s,
               100.0 * s.busy_share, share_cell(f, f.resident), share_cell(f, f.restored),
               share_cell(f, f.recomputed), fmt_s(row.metrics.ttft_s.p50),
               fmt_s(row.metrics.ttft_s.p99), times_cell(s.x_full), times_cell(s.x_dynamic),
               pair_cell(s.vs_dynamic));
  }
}

std::string service_markdown(const MultiturnResults& r) {
  std::string md =
      "\nFollow-up turns (where each found its conversation's history) and equal memory "
      "(retention: KV bytes per "
      "cached token over full KV's; full keeps everything, so x full is never at equal retention; "
      "x dynamic at equal "
      "retention interpolates dynamic's runs at this run's retention, or names the nearest run "
      "when none bracket it):"
      "\n\n| policy | ratio | retention | out tok/s | engine busy | resident | restored | "
      "recomputed | TTFT p50 | "
      "TTFT p99 | x full | x dynamic (same ratio) | x dynamic (equal retention) |\n"
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
      "|\n";
  for (const ServiceRow& s : service_rows(r)) {
    const RunRow& row = *s.row;
    const FollowupSources& f = row.metrics.followups;
    md += fmt::format(
        "| {} | {:.2f} | {:.3f} | {:.2f} | {:.0f}% | {} | {} | {} | {} | {} | {} | {} | {} |\n",
        row.policy, row.ratio, s.retention, row.metrics.output_tokens_per_s, 100.0 * s.busy_share,
        share_cell(f, f.resident), share_cell(f, f.restored), share_cell(f, f.recomputed),
        fmt_s(row.metrics.ttft_s.p50), fmt_s(row.metrics.ttft_s.p99), times_cell(s.x_full),
        times_cell(s.x_dynamic), pair_cell(s.vs_dynamic));
  }
  return md;
}

json service_json(const MultiturnResults& r) {
  json runs = json::array();
  for (const ServiceRow& s : service_rows(r)) {
    json j = {{"policy", s.row->policy},
              {"ratio", s.row->ratio},
              {"group_size", s.row->group_size},
              {"effective_retention", s.retention},
              {"busy_s", s.row->run.busy_s},
              {"idle_skipped_s", s.row->run.idle_skipped_s},
              {"followups", s.row->metrics.followups},
              {"x_full", s.x_full},
              {"x_dynamic_same_ratio", s.x_dynamic}};
    if (s.vs_dynamic)
      j["x_dynamic_equal_retention"] = {
          {"speedup", s.vs_dynamic->speedup},
          {"dynamic_tokens_per_s", s.vs_dynamic->other_tokens_per_s},
          {"dynamic_retention", s.vs_dynamic->other_retention},
          {"interpolated", s.vs_dynamic->interpolated},
          {"between_ratios", {s.vs_dynamic->below.ratio, s.vs_dynamic->above.ratio}},
          {"equal_memory", s.vs_dynamic->equal_memory()}};
    runs.push_back(std::move(j));
  }
  return runs;
}

std::string equal_retention_verdict(const MultiturnResults& r, const RunRow& tangram) {
  for (const ServiceRow& s : service_rows(r)) {
    if (s.row != &tangram || !s.vs_dynamic || !(s.vs_dynamic->other_tokens_per_s > 0)) continue;
    const EqualRetentionPair& p = *s.vs_dynamic;
    if (p.interpolated)
      return fmt::format(
          "at equal effective retention ({:.3f}; dynamic interpolated between its runs at ratio "
          "{:.2f}, "
          "retention {:.3f}, and ratio {:.2f}, retention {:.3f}): {:.2f}x dynamic's",
          p.retention, p.below.ratio, p.below.retention, p.above.ratio, p.above.retention,
          p.speedup);
    return fmt::format(
        "against dynamic's run of nearest effective retention ({:.3f} vs tangram's {:.3f}{}): "
        "{:.2f}x "
        "dynamic's",
        p.other_retention, p.retention, p.equal_memory() ? "" : ", not equal memory", p.speedup);
  }
  return {};
}

}  // namespace tangram::bench
