// `tangram bench`: the multi-turn serving benchmark, every KV policy side by side on the same
// model, the same workload and the same KV memory, everything measured in this run.
//
// For each retention ratio and each policy (full once, at ratio 1) the workload runs through
// the real scheduler (evaluation/runner.h); the report gives throughput, latency percentiles,
// admitted concurrency, KV memory and waste, preemptions, compression and reclamation time,
// attention load imbalance and session reuse, plus each policy's accuracy cost against full KV
// (greedy agreement and next-token KL on a fixed continuation). Outputs: a table on stdout,
// report.json (every raw figure), report.md, and SVG plots, in --out.
#include <memory>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/bench_models.h"
#include "cli/bench_rate_sweep.h"
#include "cli/chat_prompt.h"
#include "cli/cli_error.h"
#include "cli/commands.h"
#include "cli/restore_probe.h"
#include "common/progress.h"
#include "common/svg_plot.h"
#include "common/units.h"
#include "compress/cluster.h"
#include "compress/profile.h"
#include "evaluation/accuracy.h"
#include "evaluation/planted_eval.h"
#include "evaluation/metrics.h"
#include "evaluation/runner.h"
#include "evaluation/trace.h"
#include "evaluation/workload.h"

namespace tangram::cli {
namespace {

namespace fs = std::filesystem;

struct RunRow {
  std::string policy;
  double ratio = 1.0;
  int group_size = 0;
  WorkloadRun run;
  RunMetrics metrics;
  AgreementResult accuracy;
  bool accuracy_measured = false;
  std::optional<PlantedFactsScore> facts;  // planted-facts exact match (real chat models)
};

std::string fmt_s(double s) { return s < 1.0 ? fmt::format("{:.0f} ms", 1000.0 * s) : fmt::format("{:.2f} s", s); }

}  // namespace

int cmd_bench(const BenchOptions& in) {
  BenchOptions opt = in;
  // --- workload ---
  auto spec_r = workload_preset(opt.workload);
  if (!spec_r) return fail(spec_r.message());
  WorkloadSpec spec = *spec_r;
  if (opt.quick) spec = scale_for_quick(spec);
  if (opt.sessions > 0) spec.sessions = opt.sessions;
  if (opt.turns > 0) spec.turns = opt.turns;
  if (opt.concurrency > 0) spec.concurrency = opt.concurrency;
  if (opt.first_turn_tokens > 0) spec.first_turn_tokens = opt.first_turn_tokens;
  if (opt.rate > 0) {
    spec.arrival = WorkloadSpec::Arrival::OpenLoop;
    spec.request_rate = opt.rate;
  }
  spec.seed = opt.seed;

  // --- model ---
  auto loaded = load_model_for_serving(opt.model, opt.preset, opt.type, opt.model.empty() ? opt.layers : 0,
                                       opt.cache_dir, opt.engine.threads, model_batch_for(opt.engine));
  if (!loaded) return fail(loaded.message());
  Model& model = *loaded->model;
  const Tokenizer& tok = *loaded->tokenizer;
  const ModelConfig& cfg = model.config();
  spec.vocab = static_cast<int32_t>(std::min<int64_t>(cfg.vocab, tok.n_vocab()));

  std::vector<Conversation> conversations;
  if (!opt.trace.empty()) {
    auto t = load_trace(opt.trace);
    if (!t) return fail(t.message());
    conversations = std::move(t).value();
    for (auto& c : conversations)
      for (auto& turn : c.turns)
        if (turn.user_tokens.empty() && !turn.user_text.empty()) {
          turn.user_tokens = tok.encode(turn.user_text, false, false);
          if (turn.user_tokens.empty())
            return fail(fmt::format("{}: a turn of {} encodes to no tokens", opt.trace, c.id));
        }
    spec.turns = 0;
    for (const auto& c : conversations) spec.turns = std::max(spec.turns, static_cast<int>(c.turns.size()));
  } else {
    auto w = generate_workload(spec);
    if (!w) return fail(w.message());
    conversations = std::move(w).value();
  }
  if (auto st = check_token_range(conversations, static_cast<int32_t>(cfg.vocab)); !st) return fail(st.message());
  int64_t longest = 0;  // longest conversation in tokens
  for (const auto& c : conversations) {
    int64_t n = 0;
    for (const auto& t : c.turns) n += static_cast<int64_t>(t.user_tokens.size()) + t.output_tokens;
    longest = std::max(longest, n);
  }
  if (longest + 8 > cfg.context_length)
    return fail(fmt::format("a conversation reaches {} tokens, past the model's context of {}: shorten the "
                            "workload", longest, cfg.context_length));

  // --- profile (tangram only) ---
  std::error_code ec;
  fs::create_directories(opt.out_dir, ec);
  if (ec) return fail(fmt::format("cannot create {}: {}", opt.out_dir, ec.message()));
  const std::string fitted_path = (fs::path(opt.out_dir) / "profile.json").string();
  std::optional<RetentionProfile> fitted;  // the profile cut to the model's layers
  if (std::find(opt.policies.begin(), opt.policies.end(), "tangram") != opt.policies.end()) {
    std::string profile_path = opt.profile;
    if (profile_path.empty())
      profile_path = (shared_dir() / "profiles" / opt.profile_dir / opt.profile_model / "profile_perlayer.json").string();
    auto profile = load_profile(profile_path);
    if (!profile) return fail(fmt::format("{} (pass --profile; `tangram profile` makes one)", profile.message()));
    auto cut = profile_first_layers(*profile, cfg.n_layers);
    if (!cut) return fail(cut.message());
    fitted = std::move(cut).value();
    if (fitted->n_kv_head != cfg.n_kv_head || fitted->n_layers != cfg.n_layers)
      return fail(fmt::format("the profile {} is for {} layers x {} KV heads, the model has {} x {}: pass --profile "
                              "(`tangram profile` makes one) or leave tangram out of --policies",
                              profile_path, profile->n_layers, profile->n_kv_head, cfg.n_layers, cfg.n_kv_head));
    if (auto st = save_profile(*fitted, fitted_path); !st) return fail(st.message());
  }

  // --- KV memory: by default enough for `memory_sessions` conversations under full KV ---
  const double kv_token = static_cast<double>(cfg.n_layers) * cfg.n_kv_head * (cfg.head_dim + cfg.head_dim_v) *
                          (opt.engine.kv_type == "f32" ? 4.0 : 2.0);
  EngineFlags base = opt.engine;
  if (base.kv_memory == "auto") {
    const double bytes = opt.memory_sessions * static_cast<double>(longest + 2 * base.page_tokens) * kv_token;
    base.kv_memory = fmt::format("{}", static_cast<uint64_t>(bytes));
  }
  base.kv_scorer = opt.scorer;
  // Compression points every quarter of the first message (as the reference's 8192-token chunks
  // are to its ~25k-token prompts), so tangram's admitted peak is a fraction of the prompt.
  if (base.kv_chunk <= 0)
    base.kv_chunk = std::max<int64_t>(2 * base.kv_window + 1, (spec.first_turn_tokens / 4 + 63) / 64 * 64);
  base.max_running = std::max(base.max_running, spec.concurrency);

  // --- runs ---
  struct Plan {
    std::string policy;
    double ratio;
    int group_size;
  };
  std::vector<Plan> plans;
  for (const std::string& p : opt.policies) {
    if (p == "full") {
      plans.push_back({p, 1.0, 0});
      continue;
    }
    for (double r : opt.ratios) {
      if (p == "tangram")
        for (int g : opt.group_sizes) plans.push_back({p, r, g});
      else
        plans.push_back({p, r, 0});
    }
  }
  int64_t total_turns = 0;
  for (const auto& c : conversations) total_turns += static_cast<int64_t>(c.turns.size());
  fmt::print("tangram bench: {} ({} layers, {} x {} KV heads x {}), workload {} ({} sessions x {} turns, first "
             "turn {} tokens, concurrency {}), KV memory {}, {} runs\n",
             loaded->path, cfg.n_layers, cfg.n_head, cfg.n_kv_head, cfg.head_dim, spec.preset, spec.sessions,
             spec.turns, spec.first_turn_tokens, spec.concurrency, format_bytes(static_cast<double>(*parse_bytes(base.kv_memory))),
             plans.size());
  // Planted facts need a model that follows a chat: on by default with -m only.
  const int n_facts = opt.facts >= 0 ? opt.facts : (opt.model.empty() ? 0 : 4);
  std::optional<ChatTemplate> tmpl;
  if (n_facts > 0) {
    auto t = pick_chat_template("", tok);
    if (!t) return fail(t.message());
    tmpl = std::move(t).value();
  }
  std::vector<RunRow> rows;
  ThreadPool pool(base.threads);
  {
    ProgressBar bar("benchmark", static_cast<int64_t>(plans.size()) * total_turns);
    int64_t done_before = 0;
    for (const Plan& plan : plans) {
      EngineFlags f = base;
      f.kv_policy = plan.policy;
      f.kv_ratio = plan.ratio;
      f.kv_profile = plan.policy == "tangram" ? fitted_path : "";
      f.page_group_size = plan.policy == "tangram" ? plan.group_size : 0;
      auto eo = to_engine_options(f);
      if (!eo) return fail(eo.message());
      auto run = run_workload(model, tok, pool, eo->scheduler, conversations, spec, [&](int64_t d, int64_t) {
        bar.update(done_before + d);
      });
      if (!run) return fail(fmt::format("{} at ratio {}: {}", plan.policy, plan.ratio, run.message()));
      done_before += total_turns;
      RunRow row;
      row.policy = plan.policy;
      row.ratio = plan.ratio;
      row.group_size = eo->scheduler.page_group_size;
      auto m = compute_run_metrics(run->records, run->wall_s);
      if (!m) return fail(m.message());
      row.metrics = *m;
      row.run = std::move(run).value();
      if (opt.accuracy && !conversations.empty()) {
        // A fixed context (the first conversation's first message) and continuation (its second).
        const auto& c0 = conversations.front();
        std::vector<int32_t> ctx = c0.turns.front().user_tokens;
        std::vector<int32_t> cont;
        if (c0.turns.size() > 1) cont = c0.turns[1].user_tokens;
        if (cont.size() > 64) cont.resize(64);
        if (cont.size() < 2) cont = std::vector<int32_t>(ctx.end() - std::min<std::ptrdiff_t>(16, static_cast<std::ptrdiff_t>(ctx.size())), ctx.end());
        auto acc = policy_agreement(model, eo->scheduler.compression, row.group_size > 0 ? row.group_size : -1,
                                    eo->scheduler.page_tokens, ctx, cont, 16, pool);
        if (acc) {
          row.accuracy = *acc;
          row.accuracy_measured = true;
        } else {
          fmt::print(stderr, "note: accuracy of {} at {} not measured: {}\n", plan.policy, plan.ratio, acc.message());
        }
      }
      if (tmpl) {
        PlantedFactsOptions po;
        po.seed = opt.seed;
        po.n_facts = n_facts;
        po.filler_words = 300;  // shrunk to fit the context by run_planted_facts
        EngineOptions facts_engine = *eo;
        facts_engine.threads = base.threads;
        auto score = run_planted_facts(model, tok, *tmpl, facts_engine, po);
        if (score)
          row.facts = *score;
        else
          fmt::print(stderr, "note: planted facts of {} at {} not measured: {}\n", plan.policy, plan.ratio, score.message());
      }
      rows.push_back(std::move(row));
    }
  }

  // --- report ---
  const RunRow* full = nullptr;
  for (const auto& r : rows)
    if (r.policy == "full") full = &r;
  auto vs_full = [&](const RunRow& r) {
    return full && full->metrics.output_tokens_per_s > 0 ? r.metrics.output_tokens_per_s / full->metrics.output_tokens_per_s : 0.0;
  };
  fmt::print("\n{:<8} {:>5} {:>3} {:>8} {:>9} {:>7} {:>10} {:>10} {:>9} {:>10} {:>5} {:>10} {:>6} {:>7} {:>8} {:>6} {:>6} {:>7} {:>8}\n",
             "policy", "ratio", "G", "req/s", "out tok/s", "x full", "TTFT p50", "TTFT p99", "TPOT p50", "e2e p99",
             "conc", "KV peak", "waste", "preempt", "compr%pf", "imbal", "match", "KL", "reuse");
  nlohmann::json j;
  j["model"] = loaded->path;
  j["workload"] = {{"preset", spec.preset}, {"sessions", spec.sessions}, {"turns", spec.turns},
                   {"first_turn_tokens", spec.first_turn_tokens}, {"followup_tokens", spec.followup_tokens},
                   {"output_tokens", spec.output_tokens}, {"concurrency", spec.concurrency},
                   {"open_loop", spec.arrival == WorkloadSpec::Arrival::OpenLoop}, {"rate", spec.request_rate},
                   {"seed", spec.seed}};
  j["kv_memory_bytes"] = *parse_bytes(base.kv_memory);
  j["threads"] = pool.size();
  for (const RunRow& r : rows) {
    const RunMetrics& m = r.metrics;
    const SchedulerStats& st = r.run.stats;
    double prefill_s = 0;
    for (const auto& rec : r.run.records) prefill_s += rec.first_token_s - rec.submit_s - rec.queue_s;
    const double compress_share = prefill_s > 0 ? st.compress_seconds / prefill_s : 0;
    int64_t cached = 0, prompt = 0;
    for (const auto& rec : r.run.records) {
      cached += rec.cached_tokens;
      prompt += rec.prompt_tokens;
    }
    const double reuse = prompt > 0 ? static_cast<double>(cached) / static_cast<double>(prompt) : 0;
    fmt::print("{:<8} {:>5.2f} {:>3} {:>8.3f} {:>9.2f} {:>6.2f}x {:>10} {:>10} {:>9} {:>10} {:>5} {:>10} {:>5.1f}% {:>7} {:>7.1f}% {:>6.2f} {:>6} {:>7} {:>7.0f}%\n",
               r.policy, r.ratio, r.group_size, m.requests_per_s, m.output_tokens_per_s, vs_full(r),
               fmt_s(m.ttft_s.p50), fmt_s(m.ttft_s.p99), fmt_s(m.tpot_s.p50), fmt_s(m.e2e_s.p99), r.run.peak_running,
               format_bytes(r.run.peak_kv_bytes), 100.0 * r.run.mean_waste_fraction, st.preemptions,
               100.0 * compress_share, r.run.attention_imbalance,
               r.accuracy_measured ? fmt::format("{:.2f}", r.accuracy.token_match_rate) : std::string("-"),
               r.accuracy_measured ? fmt::format("{:.4f}", r.accuracy.mean_kl) : std::string("-"), 100.0 * reuse);
    nlohmann::json row = {
        {"policy", r.policy}, {"ratio", r.ratio}, {"group_size", r.group_size}, {"wall_s", r.run.wall_s},
        {"requests_per_s", m.requests_per_s}, {"output_tokens_per_s", m.output_tokens_per_s},
        {"throughput_vs_full", vs_full(r)},
        {"ttft_s", {{"p50", m.ttft_s.p50}, {"p90", m.ttft_s.p90}, {"p99", m.ttft_s.p99}}},
        {"tpot_s", {{"p50", m.tpot_s.p50}, {"p90", m.tpot_s.p90}, {"p99", m.tpot_s.p99}}},
        {"e2e_s", {{"p50", m.e2e_s.p50}, {"p90", m.e2e_s.p90}, {"p99", m.e2e_s.p99}}},
        {"queue_s", {{"p50", m.queue_s.p50}, {"p90", m.queue_s.p90}, {"p99", m.queue_s.p99}}},
        {"peak_concurrency", r.run.peak_running}, {"peak_kv_bytes", r.run.peak_kv_bytes},
        {"waste_fraction", r.run.mean_waste_fraction}, {"preemptions", st.preemptions},
        {"recomputed_tokens", m.recomputed_tokens}, {"cached_tokens", cached}, {"prompt_tokens", prompt},
        {"compress_s", st.compress_seconds}, {"reclaim_s", st.reclaim_seconds}, {"prefill_s", prefill_s},
        {"compressions", st.compressions}, {"pages_freed", st.pages_freed},
        {"heads_pressured", st.heads_pressured}, {"heads_compressed", st.heads_compressed},
        {"attention_imbalance", r.run.attention_imbalance},
        {"kv_bytes_per_cached_token", r.run.kv_bytes_per_cached_token},
        {"session_kv_bytes_by_turn", r.run.session_kv_bytes_by_turn},
        {"output_tokens", m.output_tokens}, {"requests", m.requests}, {"errors", m.errors}};
    if (r.accuracy_measured)
      row["accuracy"] = {{"token_match_rate", r.accuracy.token_match_rate},
                         {"first_divergence", r.accuracy.first_divergence}, {"mean_kl", r.accuracy.mean_kl},
                         {"max_kl", r.accuracy.max_kl}, {"kept_entries", r.accuracy.kept_entries},
                         {"total_entries", r.accuracy.total_entries}};
    if (r.facts)
      row["planted_facts"] = {{"questions", r.facts->questions}, {"correct", r.facts->correct},
                              {"accuracy", r.facts->accuracy()}, {"conversation_tokens", r.facts->conversation_tokens},
                              {"expected", r.facts->expected}, {"answers", r.facts->answers}};
    row["kv_used_bytes"] = {{"t", r.run.kv_used_bytes.t}, {"v", r.run.kv_used_bytes.value}};
    j["runs"].push_back(row);
  }

  // Targets, stated plainly.
  std::string verdict;
  const RunRow* best_tangram = nullptr;
  const RunRow* dynamic_same = nullptr;
  for (const auto& r : rows)
    if (r.policy == "tangram" && (!best_tangram || std::abs(r.ratio - 0.25) < std::abs(best_tangram->ratio - 0.25)))
      best_tangram = &r;
  if (best_tangram)
    for (const auto& r : rows)
      if (r.policy == "dynamic" && r.ratio == best_tangram->ratio) dynamic_same = &r;
  if (best_tangram && full) {
    const double x = vs_full(*best_tangram);
    verdict += fmt::format("tangram at ratio {:.2f}: {:.2f}x full's output tokens/s (target 2.6x: {})", best_tangram->ratio,
                           x, x >= 2.6 ? "met" : "NOT met");
    if (dynamic_same && dynamic_same->metrics.output_tokens_per_s > 0) {
      const double y = best_tangram->metrics.output_tokens_per_s / dynamic_same->metrics.output_tokens_per_s;
      verdict += fmt::format("; {:.2f}x dynamic's (target 1.3x: {})", y, y >= 1.3 ? "met" : "NOT met");
    }
  }
  if (n_facts > 0) {
    fmt::print("\nPlanted facts ({} per conversation, exact match of greedy answers, one chat session per policy):\n", n_facts);
    for (const auto& r : rows)
      if (r.facts)
        fmt::print("  {:<8} ratio {:.2f}: {} of {} ({:.0f}%), conversation {} tokens\n", r.policy, r.ratio, r.facts->correct,
                   r.facts->questions, 100.0 * r.facts->accuracy(), r.facts->conversation_tokens);
  }
  // Time to restore an idle conversation (its first message, compressed by the best tangram run's
  // policy) from the host tier, against re-prefilling it.
  std::optional<HostRestoreTiming> restore;
  if (best_tangram && !opt.trace.empty()) {
    // A trace has no single first-message length: nothing to measure.
  } else if (best_tangram) {
    EngineFlags f = base;
    f.kv_policy = best_tangram->policy;
    f.kv_ratio = best_tangram->ratio;
    f.kv_profile = fitted_path;
    f.page_group_size = best_tangram->group_size;
    auto t = measure_host_restore(model, tok, f, spec.first_turn_tokens, static_cast<uint32_t>(opt.seed));
    if (!t) return fail(t.message());
    restore = *t;
    fmt::print("\ntime to restore a {}-token conversation (tangram {:.2f}, {} serialised): {:.1f} ms from host memory "
               "against {} to re-prefill it ({:.0f}x)\n",
               restore->context, best_tangram->ratio, format_bytes(static_cast<double>(restore->session_bytes)),
               1e3 * restore->host_restore_s, fmt_s(restore->reprefill_s),
               restore->reprefill_s / std::max(restore->host_restore_s, 1e-9));
    j["restore"] = {{"context", restore->context}, {"session_bytes", restore->session_bytes},
                    {"host_restore_s", restore->host_restore_s}, {"reprefill_s", restore->reprefill_s},
                    {"host_ttft_s", restore->host_ttft_s}, {"offload_s", restore->offload_s}};
  }

  // TTFT vs request rate: full and tangram, open loop at each --rates.
  std::optional<RateSweep> sweep;
  if (!opt.rates.empty() && !opt.trace.empty()) {
    fmt::print(stderr, "note: --rates needs a generated workload (a trace has its own arrival times); skipped\n");
  } else if (!opt.rates.empty() && full && best_tangram) {
    std::vector<std::pair<std::string, SchedulerOptions>> policies;
    for (const RunRow* r : {full, best_tangram}) {
      EngineFlags f = base;
      f.kv_policy = r->policy;
      f.kv_ratio = r->ratio;
      f.kv_profile = r->policy == "tangram" ? fitted_path : "";
      f.page_group_size = r->policy == "tangram" ? r->group_size : 0;
      auto eo = to_engine_options(f);
      if (!eo) return fail(eo.message());
      policies.emplace_back(r->policy, eo->scheduler);
    }
    auto s = run_rate_sweep(model, tok, pool, spec, opt.rates, policies);
    if (!s) return fail(s.message());
    sweep = std::move(s).value();
    fmt::print("\n{:<8} {:>7} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10}\n", "policy", "rate/s", "req/s", "out tok/s",
               "TTFT p50", "TTFT p99", "queue p99", "saturated");
    for (const auto& pt : sweep->points)
      fmt::print("{:<8} {:>7.3f} {:>9.3f} {:>9.2f} {:>10} {:>10} {:>10} {:>10}\n", pt.policy, pt.rate,
                 pt.metrics.requests_per_s, pt.metrics.output_tokens_per_s, fmt_s(pt.metrics.ttft_s.p50),
                 fmt_s(pt.metrics.ttft_s.p99), fmt_s(pt.metrics.queue_s.p99), pt.saturated ? "yes" : "no");
    verdict += (verdict.empty() ? "" : "; ") + sweep->verdict;
    j["rate_sweep"] = rate_sweep_json(*sweep);
  } else if (!opt.rates.empty()) {
    fmt::print(stderr, "note: --rates compares full and tangram: put both in --policies\n");
  }
  fmt::print("\n{}\n", verdict);
  j["verdict"] = verdict;

  // Plots.
  const fs::path out(opt.out_dir);
  {
    LinePlot p;
    p.title = "Output throughput vs retention ratio";
    p.x_label = "retention ratio";
    p.y_label = "output tokens/s";
    for (const std::string& pol : opt.policies) {
      PlotSeries s{pol, {}, {}};
      for (const auto& r : rows)
        if (r.policy == pol) {
          s.x.push_back(r.ratio);
          s.y.push_back(r.metrics.output_tokens_per_s);
        }
      if (pol == "full" && s.x.size() == 1)
        for (double rr : opt.ratios) {  // full does not compress: a flat reference line
          s.x.push_back(rr);
          s.y.push_back(s.y.front());
        }
      if (!s.x.empty()) p.series.push_back(std::move(s));
    }
    (void)write_svg(p, (out / "throughput_vs_ratio.svg").string());
  }
  {
    LinePlot p;
    p.title = "KV memory in use over time";
    p.x_label = "seconds";
    p.y_label = "MiB";
    for (const auto& r : rows) {
      if (r.policy != "full" && std::abs(r.ratio - (best_tangram ? best_tangram->ratio : 0.25)) > 1e-9) continue;
      const TimeSeries d = downsample(r.run.kv_used_bytes, 200, Downsample::Max);
      PlotSeries s{fmt::format("{} {:.2f}", r.policy, r.ratio), d.t, {}};
      for (double v : d.value) s.y.push_back(v / (1024.0 * 1024.0));
      p.series.push_back(std::move(s));
    }
    (void)write_svg(p, (out / "kv_memory_over_time.svg").string());
  }
  if (fitted) {
    // Wasted slots vs group size for the profile's budgets: contiguous vs clustered grouping.
    LinePlot p;
    p.title = "Wasted KV slots vs head-group size (profile budgets)";
    p.x_label = "heads per page (G)";
    p.y_label = "wasted slots %";
    p.log2_x = true;
    PlotSeries contiguous{"contiguous", {}, {}}, clustered{"clustered", {}, {}};
    for (int g = 1; g <= cfg.n_kv_head; g *= 2) {
      auto cm = contiguous_map(cfg.n_layers, cfg.n_kv_head, g);
      auto cl = cluster_heads(fitted->median, cfg.n_layers, cfg.n_kv_head, g, false);
      if (!cm || !cl) continue;
      auto w1 = grouping_waste(std::span<const float>(fitted->median), *cm);
      auto w2 = grouping_waste(std::span<const float>(fitted->median), *cl);
      if (!w1 || !w2) continue;
      contiguous.x.push_back(g);
      contiguous.y.push_back(100.0 * *w1);
      clustered.x.push_back(g);
      clustered.y.push_back(100.0 * *w2);
      j["waste_vs_group_size"].push_back({{"G", g}, {"contiguous", *w1}, {"clustered", *w2}});
    }
    p.series = {contiguous, clustered};
    (void)write_svg(p, (out / "waste_vs_group_size.svg").string());
  }
  if (sweep) (void)write_rate_sweep_svg(*sweep, (out / "ttft_vs_rate.svg").string());
  std::ofstream(out / "report.json") << j.dump(2) << "\n";
  {
    std::ofstream md(out / "report.md");
    md << "# tangram bench report\n\n"
       << fmt::format("Model `{}` ({} layers, {} KV heads x {}), workload `{}`: {} sessions x {} turns, first turn {} "
                      "tokens, follow-ups {} tokens, {} output tokens, concurrency {}. KV memory {}. {} threads.\n\n",
                      loaded->path, cfg.n_layers, cfg.n_kv_head, cfg.head_dim, spec.preset, spec.sessions, spec.turns,
                      spec.first_turn_tokens, spec.followup_tokens, spec.output_tokens, spec.concurrency,
                      format_bytes(static_cast<double>(*parse_bytes(base.kv_memory))), pool.size())
       << "| policy | ratio | G | req/s | out tok/s | x full | TTFT p50 | TTFT p99 | TPOT p50 | e2e p99 | peak conc | KV peak | waste | preemptions | compression % of prefill | imbalance | greedy match | mean KL |\n"
       << "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
    for (const auto& jr : j["runs"]) {
      md << fmt::format("| {} | {:.2f} | {} | {:.3f} | {:.2f} | {:.2f} | {} | {} | {} | {} | {} | {} | {:.1f}% | {} | {:.1f}% | {:.2f} | {} | {} |\n",
                        jr["policy"].get<std::string>(), jr["ratio"].get<double>(), jr["group_size"].get<int>(),
                        jr["requests_per_s"].get<double>(), jr["output_tokens_per_s"].get<double>(),
                        jr["throughput_vs_full"].get<double>(), fmt_s(jr["ttft_s"]["p50"].get<double>()),
                        fmt_s(jr["ttft_s"]["p99"].get<double>()), fmt_s(jr["tpot_s"]["p50"].get<double>()),
                        fmt_s(jr["e2e_s"]["p99"].get<double>()), jr["peak_concurrency"].get<int64_t>(),
                        format_bytes(jr["peak_kv_bytes"].get<double>()), 100.0 * jr["waste_fraction"].get<double>(),
                        jr["preemptions"].get<int64_t>(),
                        jr["prefill_s"].get<double>() > 0 ? 100.0 * jr["compress_s"].get<double>() / jr["prefill_s"].get<double>() : 0.0,
                        jr["attention_imbalance"].get<double>(),
                        jr.contains("accuracy") ? fmt::format("{:.2f}", jr["accuracy"]["token_match_rate"].get<double>()) : "-",
                        jr.contains("accuracy") ? fmt::format("{:.4f}", jr["accuracy"]["mean_kl"].get<double>()) : "-");
    }
    bool any_facts = false;
    for (const auto& jr : j["runs"]) any_facts = any_facts || jr.contains("planted_facts");
    if (any_facts) {
      md << "\nPlanted facts (exact match of greedy answers to questions about facts planted earlier in one long chat):\n\n"
         << "| policy | ratio | correct | questions | accuracy |\n| --- | ---: | ---: | ---: | ---: |\n";
      for (const auto& jr : j["runs"])
        if (jr.contains("planted_facts"))
          md << fmt::format("| {} | {:.2f} | {} | {} | {:.0f}% |\n", jr["policy"].get<std::string>(), jr["ratio"].get<double>(),
                            jr["planted_facts"]["correct"].get<int64_t>(), jr["planted_facts"]["questions"].get<int64_t>(),
                            100.0 * jr["planted_facts"]["accuracy"].get<double>());
    }
    if (sweep) {
      md << "\nTTFT against request rate (open loop, new conversations per second):\n\n"
         << "| policy | rate/s | req/s | out tok/s | TTFT p50 | TTFT p99 | queue p99 | saturated |\n"
         << "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n";
      for (const auto& pt : sweep->points)
        md << fmt::format("| {} | {:.3f} | {:.3f} | {:.2f} | {} | {} | {} | {} |\n", pt.policy, pt.rate,
                          pt.metrics.requests_per_s, pt.metrics.output_tokens_per_s, fmt_s(pt.metrics.ttft_s.p50),
                          fmt_s(pt.metrics.ttft_s.p99), fmt_s(pt.metrics.queue_s.p99), pt.saturated ? "yes" : "no");
    }
    if (restore)
      md << fmt::format("\nTime to restore an idle {}-token conversation (tangram, {} serialised) from host memory: "
                        "{:.1f} ms, against {} to re-prefill it ({:.0f}x).\n",
                        restore->context, format_bytes(static_cast<double>(restore->session_bytes)),
                        1e3 * restore->host_restore_s, fmt_s(restore->reprefill_s),
                        restore->reprefill_s / std::max(restore->host_restore_s, 1e-9));
    md << "\n" << verdict << "\n\nPlots: `throughput_vs_ratio.svg`, `kv_memory_over_time.svg`, `waste_vs_group_size.svg`"
       << (sweep ? ", `ttft_vs_rate.svg`" : "") << ".\n";
  }
  fmt::print("report: {}/report.md, report.json and SVG plots\n", opt.out_dir);
  return 0;
}

Command register_bench(CLI::App& app) {
  auto opt = std::make_shared<BenchOptions>();
  BenchOptions& bench = *opt;
  bench.engine.kv_memory = "auto";
  bench.engine.kv_chunk = 0;  // auto: a quarter of the first message
  auto* c_bench = app.add_subcommand(
      "bench", "Multi-turn serving benchmark: full, uniform, dynamic and tangram KV side by side (the main job)");
  c_bench->add_option("-m,--model", bench.model, "Benchmark this GGUF instead of the generated default")
      ->check(CLI::ExistingFile);
  c_bench->add_option("--preset", bench.preset, "Attention shape of the generated model")->capture_default_str();
  c_bench->add_option("--type", bench.type, "Weight type of the generated model")->capture_default_str();
  c_bench->add_option("--layers", bench.layers, "Layers of the generated model (0: the preset's)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  c_bench->add_option("--cache-dir", bench.cache_dir, "Where generated models are kept");
  c_bench->add_option("--workload", bench.workload, "Preset: scbench (shared long context, follow-up questions), "
                      "locomo (long chat histories), sharegpt (short chat)")->capture_default_str()
      ->check(CLI::IsMember({"scbench", "locomo", "sharegpt"}));
  c_bench->add_option("--trace", bench.trace, "Replay a JSONL trace of conversations (see README)")
      ->check(CLI::ExistingFile);
  c_bench->add_option("--sessions", bench.sessions, "Conversations (default: the preset's)")->check(CLI::NonNegativeNumber);
  c_bench->add_option("--turns", bench.turns, "Turns per conversation")->check(CLI::NonNegativeNumber);
  c_bench->add_option("--concurrency", bench.concurrency, "Conversations active at once (closed loop)")
      ->check(CLI::NonNegativeNumber);
  c_bench->add_option("--first-turn-tokens", bench.first_turn_tokens, "First message length")->check(CLI::NonNegativeNumber);
  c_bench->add_option("--rate", bench.rate, "Open loop: new conversations per second (Poisson)")->check(CLI::NonNegativeNumber);
  c_bench->add_option("--rates", bench.rates,
                      "Also run full and tangram open loop at each of these rates (new conversations per second): "
                      "TTFT vs request rate, ttft_vs_rate.svg")
      ->delimiter(',');
  c_bench->add_option("--seed", bench.seed, "Workload seed")->capture_default_str();
  c_bench->add_option("--policies", bench.policies, "Policies to run")->capture_default_str()->delimiter(',');
  c_bench->add_option("--ratios", bench.ratios, "Retention ratios")->capture_default_str()->delimiter(',');
  c_bench->add_option("--group-sizes", bench.group_sizes, "Head-group sizes for tangram")->capture_default_str()
      ->delimiter(',');
  c_bench->add_option("--scorer", bench.scorer, "Scorer of the compressing policies")->capture_default_str();
  c_bench->add_option("--profile", bench.profile, "Per-head profile for tangram (default: the real one of the preset's model)")
      ->check(CLI::ExistingFile);
  c_bench->add_option("--profile-dir", bench.profile_dir, "Scorer folder of ../shared/profiles")->capture_default_str();
  c_bench->add_option("--profile-model", bench.profile_model, "Model folder of ../shared/profiles")->capture_default_str();
  c_bench->add_option("--memory-sessions", bench.memory_sessions,
                      "With --kv-memory auto: KV for this many conversations under full KV")->capture_default_str()
      ->check(CLI::PositiveNumber);
  c_bench->add_flag("!--no-accuracy", bench.accuracy, "Skip the accuracy comparison against full KV");
  c_bench->add_option("--facts", bench.facts,
                      "Planted facts in a long chat, asked back later and scored by exact match, per policy "
                      "(needs a real chat model: default 4 with -m, else 0 = off)")->check(CLI::Range(-1, 144));
  c_bench->add_flag("--quick", bench.quick, "A small workload: the whole run in under 2 minutes");
  c_bench->add_option("-o,--out", bench.out_dir, "Folder for report.json, report.md and the plots")->capture_default_str();
  add_engine_options(c_bench, bench.engine);
  return {c_bench, [opt] { return cmd_bench(*opt); }, {}};
}

}  // namespace tangram::cli
