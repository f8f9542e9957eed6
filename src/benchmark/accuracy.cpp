#include "benchmark/accuracy.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "common/file_text.h"
#include "common/units.h"
#include "evaluation/perplexity.h"
#include "profiling/profiler.h"
#include "scheduler/scheduler.h"

namespace tangram::bench {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Samples of the model's own writing: each generated from BOS alone, sampled (temperature 1,
// top-p 0.9, seeded) so that they differ, through a full-KV scheduler.
Result<std::vector<std::string>> generate_own_text(const LoadedModel& loaded,
                                                   const EngineSettings& base, int n_samples,
                                                   int64_t sample_tokens, uint64_t seed,
                                                   ThreadPool& pool) {
  EngineSettings f = base;
  f.kv_policy = "full";
  f.kv_ratio = 1.0;
  f.kv_profile.clear();
  f.page_group_size = 0;
  TG_ASSIGN(EngineOptions eo, to_engine_options(f));
  const ModelConfig& cfg = loaded.model->config();
  const double kv_token =
      static_cast<double>(cfg.n_layers) * cfg.n_kv_head * (cfg.head_dim + cfg.head_dim_v) * 4.0;
  eo.scheduler.kv_memory = static_cast<size_t>(kv_token * static_cast<double>(n_samples) *
                                               static_cast<double>(sample_tokens + 64) * 1.5) +
                           (16u << 20);
  eo.scheduler.max_running = std::max(eo.scheduler.max_running, n_samples);
  eo.scheduler.keep_sessions = false;
  eo.scheduler.prefault = false;
  TG_ASSIGN(std::unique_ptr<Scheduler> sched,
            Scheduler::create(*loaded.model, *loaded.tokenizer, pool, eo.scheduler));
  const Tokenizer& tok = *loaded.tokenizer;
  // All samples at once: decoded in one batch, so the cost is one sample's steps.
  std::vector<std::string> generated(static_cast<size_t>(n_samples)),
      errors(static_cast<size_t>(n_samples));
  for (int i = 0; i < n_samples; ++i) {
    Request r;
    r.prompt = {tok.bos() >= 0 ? tok.bos() : 0};
    r.params.temperature = 1.0f;
    r.params.top_k = 0;
    r.params.top_p = 0.9f;
    r.params.min_p = 0.0f;
    r.params.seed = seed + static_cast<uint64_t>(i);
    r.params.seed_set = true;
    r.params.max_tokens = static_cast<int>(sample_tokens);
    r.on_finish = [&generated, &errors, i](const RequestResult& res) {
      if (res.finish == FinishReason::Error) errors[static_cast<size_t>(i)] = res.error;
      generated[static_cast<size_t>(i)] = res.text;
    };
    if (auto id = sched->submit(std::move(r)); !id) return id.error();
  }
  sched->run_until_idle();
  std::vector<std::string> texts;
  for (int i = 0; i < n_samples; ++i) {
    if (!errors[static_cast<size_t>(i)].empty())
      return make_error("generating the model's own text: {}", errors[static_cast<size_t>(i)]);
    std::string& text = generated[static_cast<size_t>(i)];
    if (text.find_first_not_of(" \n\t") != std::string::npos) texts.push_back(std::move(text));
  }
  if (texts.size() < 2)
    return make_error("the model wrote {} non-empty samples from BOS, 2 are needed", texts.size());
  return texts;
}

// The retention the Pareto view places a row at, and where the figure came from.
double row_retention(const RunRow& row, const RunRow* full) {
  const double measured = row.perplexity ? row.perplexity->retention_bytes : 1.0;
  if (row.policy == "full") return 1.0;
  return effective_retention(row.run.kv_bytes_per_cached_token,
                             full ? full->run.kv_bytes_per_cached_token : 0.0, measured);
}

}  // namespace

Result<AccuracyWorkload> accuracy_workload_for(const BenchOptions& opt, const Tokenizer& tok,
                                               int64_t context, AccuracyInfo& info) {
  std::string text(default_accuracy_text());
  info.text_source = "built-in (docs/accuracy-text.txt)";
  if (!opt.accuracy_text.empty()) {
    TG_ASSIGN(text, read_file_text(opt.accuracy_text, "the accuracy text"));
    info.text_source = opt.accuracy_text;
  }
  const int64_t usable = opt.engine.ctx > 0 ? std::min<int64_t>(opt.engine.ctx, context) : context;
  const std::vector<int32_t> tokens =
      tok.encode(text, /*add_special=*/true, /*parse_special=*/false);
  auto w = choose_accuracy_workload(tokens, usable, opt.accuracy_tokens);
  if (!w) return make_error("accuracy workload from {}: {}", info.text_source, w.message());
  info.text_tokens = w->text_tokens;
  info.window = static_cast<int64_t>(w->text.size());
  info.chunk = w->chunk;
  info.context_tokens = static_cast<int64_t>(w->context.size());
  info.n_generate = w->n_generate;
  return w;
}

Result<std::string> profile_from_own_text(const BenchOptions& opt, const LoadedModel& loaded,
                                          const EngineSettings& base, const std::string& dir,
                                          ThreadPool& pool) {
  const int64_t context = loaded.model->config().context_length;
  const int64_t sample_tokens =
      std::clamp<int64_t>(std::min<int64_t>(256, opt.accuracy_tokens), 16, context - 8);
  constexpr int kSamples = 8;
  TG_ASSIGN(std::vector<std::string> texts,
            generate_own_text(loaded, base, kSamples, sample_tokens, opt.seed, pool));
  const std::string samples = (fs::path(dir) / "own_text.txt").string();
  {
    std::ofstream out(samples, std::ios::binary | std::ios::trunc);
    for (size_t i = 0; i < texts.size(); ++i) out << (i > 0 ? "\n---\n" : "") << texts[i];
    if (!out) return make_error("cannot write {}", samples);
  }
  ProfilerSettings po;
  po.model_name = loaded.path;
  po.scorer = opt.scorer;
  po.ratio = 0.3;
  po.n_samples = kSamples;
  po.sample_tokens = sample_tokens;
  po.sink = base.kv_sink;
  po.window = base.kv_window;
  po.threads = base.threads;
  const std::string profile_path = (fs::path(dir) / "own_text_profile.json").string();
  fmt::print(stderr, "profiling {} on {} samples of its own text ({}), for tangram's budgets\n",
             loaded.path, texts.size(), samples);
  TG_ASSIGN(std::vector<PilotSample> pilot,
            read_pilot_samples({samples}, *loaded.tokenizer, sample_tokens, kSamples));
  TG_ASSIGN(MeasuredProfile measured, measure_profile(*loaded.model, *loaded.tokenizer, pilot, po));
  TG_TRY(save_profile(measured.profile, profile_path));
  return profile_path;
}

void measure_accuracy(Model& model, const Tokenizer& tok, const AccuracyWorkload& w,
                      const EngineOptions& eo, ThreadPool& pool, RunRow& row) {
  const SchedulerOptions& so = eo.scheduler;
  auto acc = policy_agreement(model, so.compression, row.group_size > 0 ? row.group_size : -1,
                              so.page_tokens, w.context, w.continuation, w.n_generate, pool);
  if (acc)
    row.accuracy = *acc;
  else
    fmt::print(stderr, "note: greedy agreement of {} at {} not measured: {}\n", row.policy,
               row.ratio, acc.message());
  const std::vector<int32_t> repeat = tok.encode(kRepeatInstruction, false, false);
  PerplexityOptions po;
  po.policy = so.compression;
  po.group_size = so.page_group_size;
  po.page_tokens = so.page_tokens;
  po.kv_type = so.kv_type;
  po.reference_kv_type = reference_kv_type_for(so.kv_type);
  po.chunk = w.chunk;
  po.window = static_cast<int64_t>(w.text.size());
  po.max_step = std::min(so.prefill_chunk, so.step_tokens);
  po.bos = tok.add_bos() ? tok.bos() : -1;
  po.repeat_instruction = repeat;
  // The attention split the scheduler picks for this policy, as `tangram perplexity` does.
  model.attention_planner().set_split(so.attention_split.value_or(
      po.policy.policy == KvPolicy::Tangram ? AttentionSplit::AheadOfTime
                                            : AttentionSplit::Runtime));
  auto ppl = evaluate_perplexity(model, w.text, po, pool);
  if (ppl)
    row.perplexity = *ppl;
  else
    fmt::print(stderr, "note: perplexity of {} at {} not measured: {}\n", row.policy, row.ratio,
               ppl.message());
}

namespace {

// "full 1; uniform 0.25; dynamic 0.25, 0.15; tangram 0.25 (G 4)": the --kv-ratio of every run, by
// policy in the order they ran.
std::string ratios_run(const std::vector<RunRow>& rows) {
  std::vector<std::pair<std::string, std::string>> by_policy;
  for (const RunRow& row : rows) {
    const std::string ratio = row.group_size > 0
                                  ? fmt::format("{:g} (G {})", row.ratio, row.group_size)
                                  : fmt::format("{:g}", row.ratio);
    auto it = std::find_if(by_policy.begin(), by_policy.end(),
                           [&](const auto& p) { return p.first == row.policy; });
    if (it == by_policy.end())
      by_policy.emplace_back(row.policy, ratio);
    else
      it->second += ", " + ratio;
  }
  std::string out;
  for (const auto& [policy, ratios] : by_policy)
    out += (out.empty() ? "" : "; ") + policy + " " + ratios;
  return out;
}

}  // namespace

std::string policy_label(const RunRow& row, const MultiturnResults& r) {
  int sizes = 0;
  for (const RunRow& other : r.rows)
    if (other.policy == row.policy && other.ratio == row.ratio) ++sizes;
  return sizes > 1 ? fmt::format("{} G={}", row.policy, row.group_size) : row.policy;
}

std::string run_caption(const MultiturnResults& r) {
  const ModelConfig& cfg = r.config;
  return fmt::format(
      "{} ({} layers, {} KV heads x {}), KV memory {}, {} threads\n"
      "workload {}: {} conversations x {} turns, concurrency {}\nratios run: {}",
      fs::path(r.model_path).filename().string(), cfg.n_layers, cfg.n_kv_head, cfg.head_dim,
      format_bytes(static_cast<double>(r.kv_memory_bytes)), r.threads, r.spec.preset,
      r.spec.sessions, r.spec.turns, r.spec.concurrency, ratios_run(r.rows));
}

std::string accuracy_markdown(const MultiturnResults& r) {
  if (std::none_of(r.rows.begin(), r.rows.end(),
                   [](const RunRow& row) { return row.perplexity || row.accuracy; }))
    return "";
  const AccuracyInfo& a = r.accuracy;
  const RunRow* full = full_run(r.rows);
  std::string md =
      a.random_weights
          ? "\n## Numerical check against full KV (random weights: not accuracy)\n\nThe "
            "generated model has random weights, so these figures check that every policy's path "
            "computes what it should; they say nothing of what a policy keeps of a real model's "
            "answers (that is the task accuracy, on a real model: --task-model).\n"
          : "\n## Accuracy against full KV\n";
  md += fmt::format(
      "\nText: {} ({} tokens; the first {} read teacher-forced in "
      "turns of {}, the "
      "cache compressed after each turn as in serving). Greedy match: share of {} greedy tokens "
      "equal to full KV's "
      "until the first difference after the first {} tokens (compressed once). Mean KL: KL(p_full "
      "|| p_policy) in "
      "nats over every position of the window. Retention: the policy's KV bytes per cached token "
      "over full's "
      "(serving run; the accuracy run's own where the serving run has none). Tangram's profile: "
      "{}.\n\n"
      "| policy | ratio | G | greedy match | PPL | mean KL (nats) | max KL | retention |\n"
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
      a.text_source, a.text_tokens, a.window, a.chunk, a.n_generate, a.context_tokens,
      a.profile_source.empty() ? "none (tangram not run)" : a.profile_source);
  for (const RunRow& row : r.rows) {
    const auto& p = row.perplexity;
    md += fmt::format("| {} | {:.2f} | {} | {} | {} | {} | {} | {:.3f} |\n", row.policy, row.ratio,
                      row.group_size,
                      row.accuracy ? fmt::format("{:.2f}", row.accuracy->token_match_rate) : "-",
                      p ? fmt::format("{:.4f} ± {:.4f}", p->ppl, p->ppl_stderr) : "-",
                      p && p->compared ? fmt::format("{:.5f}", p->mean_kl) : (p ? "0" : "-"),
                      p && p->compared ? fmt::format("{:.4f}", p->max_kl) : (p ? "0" : "-"),
                      row_retention(row, full));
  }
  return md;
}

json accuracy_json(const RunRow& row, const RunRow* full) {
  json j = json::object();
  if (row.accuracy)
    j["greedy"] = {{"token_match_rate", row.accuracy->token_match_rate},
                   {"first_divergence", row.accuracy->first_divergence},
                   {"continuation_mean_kl", row.accuracy->mean_kl},
                   {"continuation_max_kl", row.accuracy->max_kl},
                   {"kept_entries", row.accuracy->kept_entries},
                   {"total_entries", row.accuracy->total_entries}};
  if (const auto& p = row.perplexity)
    j["perplexity"] = {{"ppl", p->ppl},
                       {"ppl_stderr", p->ppl_stderr},
                       {"mean_nll", p->mean_nll},
                       {"scored", p->scored},
                       {"mean_kl", p->mean_kl},
                       {"max_kl", p->max_kl},
                       {"retention_bytes", p->retention_bytes},
                       {"retention_entries", p->retention_entries},
                       {"compressions", p->compressions}};
  j["effective_retention"] = row_retention(row, full);
  return j;
}

LinePlot accuracy_retention_plot(const MultiturnResults& r) {
  const RunRow* full = full_run(r.rows);
  std::vector<AccuracyPoint> points;
  for (const RunRow& row : r.rows)
    if (row.perplexity)
      points.push_back({policy_label(row, r), row_retention(row, full), row.perplexity->mean_kl});
  LinePlot p;
  p.title = r.accuracy.random_weights
                ? "Numerical check on random weights (not accuracy): KL vs effective retention"
                : "Accuracy cost vs effective retention (lower left is better)";
  p.x_label = "effective retention (KV bytes per cached token / full KV's)";
  p.y_label = "mean KL vs full KV (nats)";
  p.x_from_zero = true;
  p.series = retention_series(points);
  p.caption = run_caption(r) +
              fmt::format("\naccuracy text: {}, {} tokens in turns of {}; one point per ratio",
                          r.accuracy.text_source, r.accuracy.window, r.accuracy.chunk);
  return p;
}

}  // namespace tangram::bench
