// The report of `tangram bench`: console tables, report.json (every raw figure), report.md and
// the SVG plots, all made from what the runs measured (MultiturnResults).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "benchmark/accuracy.h"
#include "benchmark/multiturn.h"
#include "benchmark/task_accuracy.h"
#include "common/units.h"
#include "compress/cluster.h"

namespace tangram::bench {

using nlohmann::json;

const RunRow* full_run(const std::vector<RunRow>& rows) {
  const RunRow* full = nullptr;
  for (const auto& r : rows)
    if (r.policy == "full") full = &r;
  return full;
}

const RunRow* reference_tangram_run(const std::vector<RunRow>& rows) {
  const RunRow* best = nullptr;
  for (const auto& r : rows)
    if (r.policy == "tangram" && (!best || std::abs(r.ratio - 0.25) < std::abs(best->ratio - 0.25)))
      best = &r;
  return best;
}

double effective_ratio(const MultiturnResults& r, const RunRow& row) {
  const RunRow* full = full_run(r.rows);
  const double full_bytes = full && full->run.kv_bytes_per_cached_token > 0
                                ? full->run.kv_bytes_per_cached_token
                                : r.dense_kv_bytes_per_token;
  return full_bytes > 0 ? row.run.kv_bytes_per_cached_token / full_bytes : 0.0;
}

double over_retention(const RunRow& row) {
  if (!row.committed || row.committed->kept <= 0) return 0.0;
  return static_cast<double>(row.committed->kept - row.committed->own) /
         static_cast<double>(row.committed->kept);
}

namespace {

// Output tokens/s of a run over full KV's (0 without a full run).
double throughput_vs_full(const RunRow& r, const RunRow* full) {
  return full && full->metrics.output_tokens_per_s > 0
             ? r.metrics.output_tokens_per_s / full->metrics.output_tokens_per_s
             : 0.0;
}

// Figures derived from a run's request records.
struct PrefillFigures {
  double prefill_s = 0;       // time from admission to first token, summed over requests
  double compress_share = 0;  // compression time over prefill time
  int64_t cached = 0, prompt = 0;
  double reuse = 0;  // cached prompt tokens over all prompt tokens
};

PrefillFigures prefill_figures(const RunRow& r) {
  PrefillFigures f;
  for (const auto& rec : r.run.records) {
    f.prefill_s += rec.first_token_s - rec.submit_s - rec.queue_s;
    f.cached += rec.cached_tokens;
    f.prompt += rec.prompt_tokens;
  }
  f.compress_share = f.prefill_s > 0 ? r.run.stats.compress_seconds / f.prefill_s : 0;
  f.reuse = f.prompt > 0 ? static_cast<double>(f.cached) / static_cast<double>(f.prompt) : 0;
  return f;
}

json percentiles(const LatencySummary& p) {
  return {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}};
}

json run_json(const MultiturnResults& results, const RunRow& r) {
  const RunRow* full = full_run(results.rows);
  const RunMetrics& m = r.metrics;
  const SchedulerStats& st = r.run.stats;
  const PrefillFigures pf = prefill_figures(r);
  json row = {{"policy", r.policy},
              {"ratio", r.ratio},
              {"effective_ratio", effective_ratio(results, r)},
              {"committed_ratio", r.committed && r.committed->full > 0
                                      ? json(static_cast<double>(r.committed->kept) /
                                             static_cast<double>(r.committed->full))
                                      : json(nullptr)},
              {"retention_context", r.retention_context},
              {"over_retention", over_retention(r)},
              {"group_size", r.group_size},
              {"wall_s", r.run.wall_s},
              {"requests_per_s", m.requests_per_s},
              {"output_tokens_per_s", m.output_tokens_per_s},
              {"throughput_vs_full", throughput_vs_full(r, full)},
              {"ttft_s", percentiles(m.ttft_s)},
              {"tpot_s", percentiles(m.tpot_s)},
              {"e2e_s", percentiles(m.e2e_s)},
              {"queue_s", percentiles(m.queue_s)},
              {"peak_concurrency", r.run.peak_running},
              {"peak_kv_bytes", r.run.peak_kv_bytes},
              {"waste_fraction", r.run.mean_waste_fraction},
              {"preemptions", st.preemptions},
              {"recomputed_tokens", m.recomputed_tokens},
              {"cached_tokens", pf.cached},
              {"prompt_tokens", pf.prompt},
              {"compress_s", st.compress_seconds},
              {"reclaim_s", st.reclaim_seconds},
              {"prefill_s", pf.prefill_s},
              {"compressions", st.compressions},
              {"pages_freed", st.pages_freed},
              {"heads_pressured", st.heads_pressured},
              {"heads_compressed", st.heads_compressed},
              {"attention_imbalance", r.run.attention_imbalance},
              {"kv_bytes_per_cached_token", r.run.kv_bytes_per_cached_token},
              {"session_kv_bytes_by_turn", r.run.session_kv_bytes_by_turn},
              {"output_tokens", m.output_tokens},
              {"requests", m.requests},
              {"errors", m.errors}};
  if (r.accuracy)
    row["accuracy"] = {{"token_match_rate", r.accuracy->token_match_rate},
                       {"first_divergence", r.accuracy->first_divergence},
                       {"mean_kl", r.accuracy->mean_kl},
                       {"max_kl", r.accuracy->max_kl},
                       {"kept_entries", r.accuracy->kept_entries},
                       {"total_entries", r.accuracy->total_entries}};
  if (r.facts)
    row["planted_facts"] = {
        {"questions", r.facts->questions}, {"correct", r.facts->correct},
        {"accuracy", r.facts->accuracy()}, {"conversation_tokens", r.facts->conversation_tokens},
        {"expected", r.facts->expected},   {"answers", r.facts->answers}};
  row["accuracy_on_text"] = accuracy_json(r, full);
  if (r.task) row["task"] = task_json(*r.task);
  row["kv_used_bytes"] = {{"t", r.run.kv_used_bytes.t}, {"v", r.run.kv_used_bytes.value}};
  return row;
}

std::string accuracy_cell(const RunRow& r, bool kl) {
  if (!r.accuracy) return "-";
  return kl ? fmt::format("{:.4f}", r.accuracy->mean_kl)
            : fmt::format("{:.2f}", r.accuracy->token_match_rate);
}

}  // namespace

std::string multiturn_verdict(const MultiturnResults& r) {
  std::string v;
  const RunRow* full = full_run(r.rows);
  const RunRow* tangram = reference_tangram_run(r.rows);
  if (tangram && full) {
    const double x = throughput_vs_full(*tangram, full);
    // Full keeps everything: against it a compressing policy is never at equal retention.
    v += fmt::format(
        "tangram at ratio {:.2f} (effective retention {:.3f}, full's 1): {:.2f}x full's output "
        "tokens/s "
        "(target 2.6x: {})",
        tangram->ratio, effective_ratio(r, *tangram), x, x >= 2.6 ? "met" : "NOT met");
    const RunRow* dynamic = nullptr;
    for (const auto& row : r.rows)
      if (row.policy == "dynamic" && row.ratio == tangram->ratio) dynamic = &row;
    if (dynamic && dynamic->metrics.output_tokens_per_s > 0) {
      const double y = tangram->metrics.output_tokens_per_s / dynamic->metrics.output_tokens_per_s;
      v += fmt::format(
          "; {:.2f}x dynamic's at the same ratio (dynamic's retention {:.3f}; target 1.3x: {})", y,
          effective_ratio(r, *dynamic), y >= 1.3 ? "met" : "NOT met");
    }
    if (const std::string eq = equal_retention_verdict(r, *tangram); !eq.empty()) v += "; " + eq;
  }
  if (r.sweep) v += (v.empty() ? "" : "; ") + r.sweep->verdict;
  return v;
}

namespace {

std::string restore_sentence(const HostRestoreTiming& t) {
  return fmt::format("{:.1f} ms from host memory against {} to re-prefill it ({:.0f}x)",
                     1e3 * t.host_restore_s, fmt_s(t.reprefill_s),
                     t.reprefill_s / std::max(t.host_restore_s, 1e-9));
}

// What the ratio columns mean, and tangram's bytes per cached token against uniform's.
std::string retention_note(const MultiturnResults& r) {
  std::string note =
      "Effective ratio: KV bytes per cached token over full KV's (sink, window, group maxima, page "
      "rounding "
      "and uncompressed generated tokens included). Over-retained: tokens heads keep beyond their "
      "own "
      "budgets because their group keeps its largest, over the tokens kept. Empty slots: allocated "
      "but "
      "unused page slots.";
  for (const RunRow& t : r.rows) {
    if (t.policy != "tangram") continue;
    for (const RunRow& u : r.rows)
      if (u.policy == "uniform" && u.ratio == t.ratio && effective_ratio(r, u) > 0)
        note += fmt::format(
            " Tangram (G {}) at ratio {:.2f} keeps {:.2f}x uniform's bytes per cached token.",
            t.group_size, t.ratio, effective_ratio(r, t) / effective_ratio(r, u));
  }
  return note;
}

std::string runs_markdown(const MultiturnResults& r) {
  const RunRow* full = full_run(r.rows);
  std::string md =
      "| policy | ratio | effective ratio | over-retained | G | req/s | out tok/s | x full | TTFT "
      "p50 | TTFT p99 | "
      "TPOT p50 | e2e p99 | peak conc | KV peak | empty slots | preemptions | compression % of "
      "prefill | imbalance | "
      "greedy match | mean KL |\n"
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
      "---: | ---: | ---: | "
      "---: | ---: | ---: | ---: |\n";
  for (const auto& row : r.rows) {
    const RunMetrics& m = row.metrics;
    md += fmt::format(
        "| {} | {:.2f} | {:.3f} | {:.1f}% | {} | {:.3f} | {:.2f} | {:.2f} | {} | {} | {} | {} | {} "
        "| {} | "
        "{:.1f}% | {} | {:.1f}% | {:.2f} | {} | {} |\n",
        row.policy, row.ratio, effective_ratio(r, row), 100.0 * over_retention(row), row.group_size,
        m.requests_per_s, m.output_tokens_per_s, throughput_vs_full(row, full), fmt_s(m.ttft_s.p50),
        fmt_s(m.ttft_s.p99), fmt_s(m.tpot_s.p50), fmt_s(m.e2e_s.p99), row.run.peak_running,
        format_bytes(row.run.peak_kv_bytes), 100.0 * row.run.mean_waste_fraction,
        row.run.stats.preemptions, 100.0 * prefill_figures(row).compress_share,
        row.run.attention_imbalance, accuracy_cell(row, false), accuracy_cell(row, true));
  }
  return md + "\n" + retention_note(r) + "\n";
}

std::string extras_markdown(const MultiturnResults& r) {
  std::string md;
  if (std::any_of(r.rows.begin(), r.rows.end(),
                  [](const RunRow& row) { return row.facts.has_value(); })) {
    md +=
        "\nPlanted facts (exact match of greedy answers to questions about facts planted earlier "
        "in one long chat):\n\n"
        "| policy | ratio | correct | questions | accuracy |\n| --- | ---: | ---: | ---: | ---: "
        "|\n";
    for (const auto& row : r.rows)
      if (row.facts)
        md += fmt::format("| {} | {:.2f} | {} | {} | {:.0f}% |\n", row.policy, row.ratio,
                          row.facts->correct, row.facts->questions, 100.0 * row.facts->accuracy());
  }
  if (r.sweep) {
    md += fmt::format(
        "\nCapacity: each run open loop at every rate of --rates; its goodput is the highest rate "
        "at which it, and every lower rate, kept TTFT p90 within {:g} s (--ttft-limit), and its "
        "output tokens/s there.\n\n"
        "| policy | ratio | G | goodput (conversations/s) | out tok/s at it | TTFT p90 at it |\n"
        "| --- | ---: | ---: | ---: | ---: | ---: |\n",
        r.sweep->ttft_limit_s);
    for (const Goodput& g : r.sweep->goodput)
      md += g.rate > 0
                ? fmt::format("| {} | {:.2f} | {} | {:g} | {:.2f} | {} |\n", g.policy, g.ratio,
                              g.group_size, g.rate, g.output_tokens_per_s, fmt_s(g.ttft_p90_s))
                : fmt::format("| {} | {:.2f} | {} | below the lowest rate | - | - |\n", g.policy,
                              g.ratio, g.group_size);
    md +=
        "\nTTFT against request rate (open loop, new conversations per second):\n\n"
        "| run | rate/s | req/s | out tok/s | TTFT p50 | TTFT p90 | TTFT p99 | queue p99 | "
        "saturated "
        "|\n"
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n";
    for (const auto& pt : r.sweep->points)
      md += fmt::format("| {} | {:.3f} | {:.3f} | {:.2f} | {} | {} | {} | {} | {} |\n",
                        run_label(pt.policy, pt.ratio, pt.group_size), pt.rate,
                        pt.metrics.requests_per_s, pt.metrics.output_tokens_per_s,
                        fmt_s(pt.metrics.ttft_s.p50), fmt_s(pt.metrics.ttft_s.p90),
                        fmt_s(pt.metrics.ttft_s.p99), fmt_s(pt.metrics.queue_s.p99),
                        pt.saturated ? "yes" : "no");
  }
  if (r.restore)
    md += fmt::format("\nTime to restore an idle {}-token conversation ({}, {} serialised): {}.\n",
                      r.restore->context, r.restore_policy,
                      format_bytes(static_cast<double>(r.restore->session_bytes)),
                      restore_sentence(*r.restore));
  if (!r.restore_contexts.empty()) {
    md += fmt::format("\nRestoring an idle conversation ({}) against re-prefilling it:\n\n",
                      r.restore_policy) +
          "| context | session KV | re-prefill | host | x faster | disk | x faster |\n"
          "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
    for (const HostRestoreTiming& t : r.restore_contexts)
      md += fmt::format("| {} | {} | {:.1f} ms | {:.2f} ms | {:.1f}x | {:.2f} ms | {:.1f}x |\n",
                        t.context, format_bytes(static_cast<double>(t.session_bytes)),
                        1e3 * t.reprefill_s, 1e3 * t.host_restore_s,
                        t.reprefill_s / std::max(t.host_restore_s, 1e-9), 1e3 * t.disk_restore_s,
                        t.reprefill_s / std::max(t.disk_restore_s, 1e-9));
  }
  return md;
}

LinePlot throughput_plot(const MultiturnResults& r, const std::vector<std::string>& policies) {
  LinePlot p;
  p.title = "Output throughput vs retention ratio";
  p.x_label = "retention ratio asked (--ratios; dynamic also x --dynamic-bracket)";
  std::vector<double> ratios;  // every ratio a compressing policy ran at, for full's reference line
  for (const auto& row : r.rows)
    if (row.policy != "full") ratios.push_back(row.ratio);
  std::sort(ratios.begin(), ratios.end());
  ratios.erase(std::unique(ratios.begin(), ratios.end()), ratios.end());
  p.y_label = "output tokens/s (all conversations)";
  std::vector<int> group_sizes;  // tangram's, one line each when it ran with several
  for (const auto& row : r.rows)
    if (row.policy == "tangram" &&
        std::find(group_sizes.begin(), group_sizes.end(), row.group_size) == group_sizes.end())
      group_sizes.push_back(row.group_size);
  for (const std::string& pol : policies)
    for (size_t g = 0; g < (pol == "tangram" && group_sizes.size() > 1 ? group_sizes.size() : 1);
         ++g) {
      const bool per_group = pol == "tangram" && group_sizes.size() > 1;
      PlotSeries s{per_group ? fmt::format("{} G={}", pol, group_sizes[g]) : pol, {}, {}};
      for (const auto& row : r.rows)
        if (row.policy == pol && (!per_group || row.group_size == group_sizes[g])) {
          s.x.push_back(row.ratio);
          s.y.push_back(row.metrics.output_tokens_per_s);
        }
      if (pol == "full" && s.x.size() == 1)
        for (double rr : ratios) {  // full does not compress: a flat reference line
          s.x.push_back(rr);
          s.y.push_back(s.y.front());
        }
      if (!s.x.empty()) p.series.push_back(std::move(s));
    }
  return p;
}

// Full KV and every policy at the reference tangram run's ratio.
LinePlot kv_memory_plot(const MultiturnResults& r) {
  LinePlot p;
  p.title = "KV memory in use over time";
  p.x_label = "time since the run started (s)";
  p.y_label = "KV pages in use (MiB)";
  const RunRow* tangram = reference_tangram_run(r.rows);
  const double ratio = tangram ? tangram->ratio : 0.25;
  for (const auto& row : r.rows) {
    if (row.policy != "full" && std::abs(row.ratio - ratio) > 1e-9) continue;
    const TimeSeries d = downsample(row.run.kv_used_bytes, 200, Downsample::Max);
    PlotSeries s{fmt::format("{} {:.2f}", row.policy, row.ratio), d.t, {}};
    for (double v : d.value) s.y.push_back(v / (1024.0 * 1024.0));
    p.series.push_back(std::move(s));
  }
  // The pool's size, so a reader sees which runs were bound by memory.
  double end_s = 0;
  for (const PlotSeries& s : p.series)
    if (!s.x.empty()) end_s = std::max(end_s, s.x.back());
  const double limit_mib = static_cast<double>(r.kv_memory_bytes) / (1024.0 * 1024.0);
  p.series.push_back(PlotSeries{"KV memory (limit)", {0.0, end_s}, {limit_mib, limit_mib}});
  return p;
}

// Over-allocation vs group size for the profile's median retention (the tokens a group keeps
// beyond its members' own budgets, over what it keeps): contiguous runs of G heads (unified pages
// at G = the KV heads of a layer), clustered per layer and clustered globally, at every power of
// two up to all heads. Also records the figures in `j` (null where a grouping does not exist).
LinePlot waste_plot(const RetentionProfile& profile, const ModelConfig& cfg, json& j) {
  LinePlot p;
  p.title = "Over-allocation vs head-group size (profile's median retention)";
  p.x_label = "heads per page group (G)";
  p.y_label = "over-allocated KV slots (% of allocated)";
  p.log2_x = true;
  const int L = cfg.n_layers, H = cfg.n_kv_head;
  PlotSeries contiguous{"contiguous (unified at G = KV heads)", {}, {}},
      per_layer{"clustered per layer", {}, {}}, global{"clustered globally", {}, {}};
  auto add = [&](PlotSeries& series, int g, const Result<ClusterMap>& m) -> json {
    if (!m) return nullptr;
    const auto w = grouping_waste(std::span<const float>(profile.median), *m);
    if (!w) return nullptr;
    series.x.push_back(g);
    series.y.push_back(100.0 * *w);
    return *w;
  };
  for (int g = 1; g <= L * H; g *= 2) {
    if ((L * H) % g != 0) break;
    json point = {{"G", g}};
    point["contiguous"] = add(contiguous, g, contiguous_map(L, H, g));
    point["per_layer"] = add(per_layer, g, cluster_heads(profile.median, L, H, g, false));
    point["global"] = add(global, g, cluster_heads(profile.median, L, H, g, true));
    j.push_back(point);
  }
  p.series = {contiguous, per_layer, global};
  return p;
}

}  // namespace

void print_runs_table(const MultiturnResults& r, std::FILE* console) {
  const RunRow* full = full_run(r.rows);
  fmt::print(console,
             "\n{:<8} {:>5} {:>5} {:>6} {:>3} {:>8} {:>9} {:>7} {:>10} {:>10} {:>9} {:>10} {:>5} "
             "{:>10} {:>6} {:>7} {:>8} "
             "{:>6} {:>6} {:>7} {:>8}\n",
             "policy", "ratio", "eff", "overrt", "G", "req/s", "out tok/s", "x full", "TTFT p50",
             "TTFT p99", "TPOT p50", "e2e p99", "conc", "KV peak", "empty", "preempt", "compr%pf",
             "imbal", "match", "KL", "reuse");
  for (const RunRow& row : r.rows) {
    const RunMetrics& m = row.metrics;
    const PrefillFigures pf = prefill_figures(row);
    fmt::print(console,
               "{:<8} {:>5.2f} {:>5.3f} {:>5.1f}% {:>3} {:>8.3f} {:>9.2f} {:>6.2f}x {:>10} {:>10} "
               "{:>9} {:>10} {:>5} "
               "{:>10} {:>5.1f}% {:>7} {:>7.1f}% {:>6.2f} {:>6} {:>7} {:>7.0f}%\n",
               row.policy, row.ratio, effective_ratio(r, row), 100.0 * over_retention(row),
               row.group_size, m.requests_per_s, m.output_tokens_per_s,
               throughput_vs_full(row, full), fmt_s(m.ttft_s.p50), fmt_s(m.ttft_s.p99),
               fmt_s(m.tpot_s.p50), fmt_s(m.e2e_s.p99), row.run.peak_running,
               format_bytes(row.run.peak_kv_bytes), 100.0 * row.run.mean_waste_fraction,
               row.run.stats.preemptions, 100.0 * pf.compress_share, row.run.attention_imbalance,
               accuracy_cell(row, false), accuracy_cell(row, true), 100.0 * pf.reuse);
  }
  fmt::print(console, "\n{}\n", retention_note(r));
  if (r.facts_per_conversation > 0) {
    fmt::print(console,
               "\nPlanted facts ({} per conversation, exact match of greedy answers, one chat "
               "session per policy):\n",
               r.facts_per_conversation);
    for (const auto& row : r.rows)
      if (row.facts)
        fmt::print(console, "  {:<8} ratio {:.2f}: {} of {} ({:.0f}%), conversation {} tokens\n",
                   row.policy, row.ratio, row.facts->correct, row.facts->questions,
                   100.0 * row.facts->accuracy(), row.facts->conversation_tokens);
  }
}

void print_restore(const MultiturnResults& r, std::FILE* console) {
  if (r.restore)
    fmt::print(console, "\ntime to restore a {}-token conversation ({}, {} serialised): {}\n",
               r.restore->context, r.restore_policy,
               format_bytes(static_cast<double>(r.restore->session_bytes)),
               restore_sentence(*r.restore));
  if (r.restore_contexts.empty()) return;
  fmt::print(console, "\nrestoring an idle conversation ({}) against re-prefilling it:\n",
             r.restore_policy);
  fmt::print(console, "{:>8} {:>10} {:>11} {:>11} {:>9} {:>11} {:>9} {:>10} {:>10}\n", "context",
             "session KV", "re-prefill", "host", "x faster", "disk", "x faster", "offload",
             "TTFT host");
  for (const HostRestoreTiming& t : r.restore_contexts)
    fmt::print(
        console,
        "{:>8} {:>10} {:>9.1f}ms {:>9.2f}ms {:>8.1f}x {:>9.2f}ms {:>8.1f}x {:>8.2f}ms {:>8.1f}ms\n",
        t.context, format_bytes(static_cast<double>(t.session_bytes)), 1e3 * t.reprefill_s,
        1e3 * t.host_restore_s, t.reprefill_s / std::max(t.host_restore_s, 1e-9),
        1e3 * t.disk_restore_s, t.reprefill_s / std::max(t.disk_restore_s, 1e-9), 1e3 * t.offload_s,
        1e3 * t.host_ttft_s);
}

void print_rate_sweep(const RateSweep& sweep, std::FILE* console) {
  fmt::print(console, "\n{:<16} {:>7} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10}\n", "run", "rate/s",
             "req/s", "out tok/s", "TTFT p50", "TTFT p90", "TTFT p99", "saturated");
  for (const auto& pt : sweep.points)
    fmt::print(console, "{:<16} {:>7.3f} {:>9.3f} {:>9.2f} {:>10} {:>10} {:>10} {:>10}\n",
               run_label(pt.policy, pt.ratio, pt.group_size), pt.rate, pt.metrics.requests_per_s,
               pt.metrics.output_tokens_per_s, fmt_s(pt.metrics.ttft_s.p50),
               fmt_s(pt.metrics.ttft_s.p90), fmt_s(pt.metrics.ttft_s.p99),
               pt.saturated ? "yes" : "no");
  fmt::print(console, "goodput (highest rate with TTFT p90 within {:g} s):", sweep.ttft_limit_s);
  for (size_t i = 0; i < sweep.goodput.size(); ++i) {
    const Goodput& g = sweep.goodput[i];
    fmt::print(console, "{} {} {}", i == 0 ? "" : ";", run_label(g.policy, g.ratio, g.group_size),
               g.rate > 0 ? fmt::format("{:g}/s ({:.1f} tok/s)", g.rate, g.output_tokens_per_s)
                          : std::string("below the lowest rate"));
  }
  fmt::print(console, "\n");
}

BenchReport multiturn_report(const MultiturnResults& r, const std::vector<std::string>& policies) {
  const WorkloadSpec& spec = r.spec;
  const ModelConfig& cfg = r.config;
  BenchReport report;
  json& j = report.json;
  j["model"] = r.model_path;
  j["workload"] = {
      {"preset", spec.preset},
      {"sessions", spec.sessions},
      {"turns", spec.turns},
      {"first_turn_tokens", spec.first_turn_tokens},
      {"followup_tokens", spec.followup_tokens},
      {"output_tokens", spec.output_tokens},
      {"concurrency", spec.concurrency},
      {"open_loop", spec.arrival == WorkloadSpec::Arrival::OpenLoop},
      {"rate", spec.request_rate},
      {"think_time_s", spec.think_time_s},
      {"think_time",
       spec.think_time_dist == WorkloadSpec::ThinkTime::Exponential ? "exponential" : "constant"},
      {"seed", spec.seed}};
  j["kv_memory_bytes"] = r.kv_memory_bytes;
  j["threads"] = r.threads;
  j["runs"] = json::array();
  for (const RunRow& row : r.rows) j["runs"].push_back(run_json(r, row));
  if (r.restore)
    j["restore"] = {{"context", r.restore->context},
                    {"session_bytes", r.restore->session_bytes},
                    {"host_restore_s", r.restore->host_restore_s},
                    {"reprefill_s", r.restore->reprefill_s},
                    {"host_ttft_s", r.restore->host_ttft_s},
                    {"offload_s", r.restore->offload_s}};
  for (const HostRestoreTiming& t : r.restore_contexts)
    j["restore_contexts"].push_back({{"context", t.context},
                                     {"session_bytes", t.session_bytes},
                                     {"prefill_s", t.prefill_s},
                                     {"reprefill_s", t.reprefill_s},
                                     {"host_restore_s", t.host_restore_s},
                                     {"host_ttft_s", t.host_ttft_s},
                                     {"disk_restore_s", t.disk_restore_s},
                                     {"disk_ttft_s", t.disk_ttft_s},
                                     {"offload_s", t.offload_s},
                                     {"policy", r.restore_policy}});
  if (!r.oversubscribed.is_null()) j["oversubscribed"] = r.oversubscribed;
  if (r.sweep) {
    j["rate_sweep"] = rate_sweep_json(*r.sweep);
    j["goodput"] = goodput_json(*r.sweep);
  }
  j["service"] = service_json(r);
  j["verdict"] = multiturn_verdict(r);

  // The frontier first: what each policy keeps of the answers, against what it keeps of the KV
  // and what it serves.
  const bool task = std::any_of(r.rows.begin(), r.rows.end(),
                                [](const RunRow& row) { return row.task.has_value(); });
  if (task) {
    report.plots.emplace_back("task_accuracy_vs_retention.svg", task_retention_plot(r));
    report.plots.emplace_back("task_accuracy_vs_throughput.svg", task_throughput_plot(r));
  }
  report.plots.emplace_back("throughput_vs_ratio.svg", throughput_plot(r, policies));
  report.plots.emplace_back("kv_memory_over_time.svg", kv_memory_plot(r));
  if (r.profile)
    report.plots.emplace_back("waste_vs_group_size.svg",
                              waste_plot(*r.profile, cfg, j["waste_vs_group_size"]));
  if (r.sweep) report.plots.emplace_back("ttft_vs_rate.svg", rate_sweep_plot(*r.sweep));
  for (auto& [name, plot] : report.plots)
    if (plot.caption.empty()) plot.caption = run_caption(r);
  if (r.sweep)
    report.plots.back().second.caption += "; the rates: the same conversations, open loop";
  if (std::any_of(r.rows.begin(), r.rows.end(),
                  [](const RunRow& row) { return row.perplexity.has_value(); }))
    report.plots.emplace_back("accuracy_vs_retention.svg", accuracy_retention_plot(r));
  j["accuracy_workload"] = {{"text", r.accuracy.text_source},
                            {"text_tokens", r.accuracy.text_tokens},
                            {"window", r.accuracy.window},
                            {"chunk", r.accuracy.chunk},
                            {"context_tokens", r.accuracy.context_tokens},
                            {"n_generate", r.accuracy.n_generate},
                            {"profile", r.accuracy.profile_source}};

  std::string plots;
  // Shown in the report (a Markdown viewer renders them side by side where there is room).
  for (const auto& [name, plot] : report.plots)
    plots += fmt::format("![{}]({})\n", plot.title, name);
  report.markdown =
      "# tangram bench report\n\n" +
      fmt::format(
          "Model `{}` ({} layers, {} KV heads x {}), workload `{}`: {} sessions x {} turns, first "
          "turn {} tokens, follow-ups {} tokens, {} output tokens, concurrency {}. KV memory {}. "
          "{} threads.\n\n",
          r.model_path, cfg.n_layers, cfg.n_kv_head, cfg.head_dim, spec.preset, spec.sessions,
          spec.turns, spec.first_turn_tokens, spec.followup_tokens, spec.output_tokens,
          spec.concurrency, format_bytes(static_cast<double>(r.kv_memory_bytes)), r.threads) +
      runs_markdown(r) + task_markdown(r) + service_markdown(r) + accuracy_markdown(r) +
      extras_markdown(r) + "\n" + multiturn_verdict(r) + "\n\n## Plots\n\n" + plots;
  return report;
}

}  // namespace tangram::bench
