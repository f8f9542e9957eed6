// `tangram bench`: the multi-turn serving benchmark, every KV policy side by side on the same
// model, the same workload and the same KV memory, everything measured in this run.
//
// For each retention ratio and each policy (full once, at ratio 1) the workload runs through
// the real scheduler (evaluation/runner.h); the report gives throughput, latency percentiles,
// admitted concurrency, KV memory and waste, preemptions, compression and reclamation time,
// attention load imbalance and session reuse, plus each policy's accuracy cost against full KV
// (greedy agreement and next-token KL on a fixed continuation). The pipeline: set up (workload,
// model, profile, engine flags), run and measure every plan, then the restore probe and the rate
// sweep, then the report (multiturn_report.cpp; the output convention of report.h).
#include "benchmark/multiturn_bench.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>

#include <unistd.h>

#include <fmt/format.h>

#include "benchmark/accuracy.h"
#include "benchmark/multiturn.h"
#include "benchmark/oversubscribed.h"
#include "benchmark/task_accuracy.h"
#include "common/progress.h"
#include "common/units.h"
#include "evaluation/trace.h"
#include "kv/kv_row.h"
#include "launch/chat_prompt.h"
#include "launch/data_dir.h"
#include "launch/model_loading.h"

namespace tangram::bench {
namespace {

namespace fs = std::filesystem;

// What every run shares: the model, the conversations and the engine flags they start from.
struct BenchSetup {
  LoadedModel loaded;
  WorkloadSpec spec;
  std::vector<Conversation> conversations;
  int64_t longest = 0;                        // longest conversation in tokens
  std::optional<RetentionProfile> profile;    // cut to the model's layers (tangram only)
  std::string profile_path;                   // where that cut is saved for the engine to load
  EngineSettings base;                        // the engine flags before each plan's policy is set
  std::optional<ChatTemplate> chat_template;  // planted facts only
  int n_facts = 0;
  std::optional<AccuracyWorkload> accuracy;  // text the model knows, cut to its context
  AccuracyInfo accuracy_info;
  std::optional<TaskSetup> task;  // task accuracy on --task-model
};

Result<WorkloadSpec> workload_spec(const BenchOptions& opt) {
  TG_ASSIGN(WorkloadSpec spec, workload_preset(opt.workload));
  if (opt.quick) spec = scale_for_quick(spec);
  if (opt.conversations > 0) spec.sessions = opt.conversations;
  if (opt.turns > 0) spec.turns = opt.turns;
  if (opt.concurrency > 0) spec.concurrency = opt.concurrency;
  if (opt.first_turn_tokens > 0) spec.first_turn_tokens = opt.first_turn_tokens;
  if (opt.followup_tokens > 0) spec.followup_tokens = opt.followup_tokens;
  if (opt.gen_tokens > 0) spec.output_tokens = opt.gen_tokens;
  if (opt.rate > 0) {
    spec.arrival = WorkloadSpec::Arrival::OpenLoop;
    spec.request_rate = opt.rate;
  }
  if (opt.think_time >= 0) spec.think_time_s = opt.think_time;
  spec.seed = opt.seed;
  return spec;
}

// The trace's conversations (its text turns tokenised) or the generated workload's.
Result<std::vector<Conversation>> load_conversations(const BenchOptions& opt, WorkloadSpec& spec,
                                                     const Tokenizer& tok) {
  if (opt.trace.empty()) return generate_workload(spec);
  TG_ASSIGN(std::vector<Conversation> conversations, load_trace(opt.trace));
  for (auto& c : conversations)
    for (auto& turn : c.turns)
      if (turn.user_tokens.empty() && !turn.user_text.empty()) {
        turn.user_tokens = tok.encode(turn.user_text, false, false);
        if (turn.user_tokens.empty())
          return make_error("{}: a turn of {} encodes to no tokens", opt.trace, c.id);
      }
  spec.turns = 0;
  for (const auto& c : conversations)
    spec.turns = std::max(spec.turns, static_cast<int>(c.turns.size()));
  return conversations;
}

int64_t longest_conversation(const std::vector<Conversation>& conversations) {
  int64_t longest = 0;
  for (const auto& c : conversations) {
    int64_t n = 0;
    for (const auto& t : c.turns) n += static_cast<int64_t>(t.user_tokens.size()) + t.output_tokens;
    longest = std::max(longest, n);
  }
  return longest;
}

// The preset's message lengths scaled down (the same for every policy) so that its longest
// conversation fits a model with a short context; lengths given on the command line are kept.
Status shrink_messages_to_context(WorkloadSpec& spec, int64_t context,
                                  std::vector<Conversation>& conversations, int64_t& longest) {
  const int64_t outputs = static_cast<int64_t>(spec.turns) * spec.output_tokens;
  const int64_t first = spec.first_turn_tokens, followup = spec.followup_tokens;
  // Message lengths are drawn around their means: scale, regenerate, and again while it overflows.
  for (int attempt = 0; attempt < 4 && longest + 8 > context; ++attempt) {
    const double prompts = static_cast<double>(std::max<int64_t>(longest - outputs, 1));
    const double scale = 0.97 * static_cast<double>(context - 8 - outputs) / prompts;
    if (scale <= 0)
      return Status::Ok();  // the outputs alone do not fit: the caller's error says so
    spec.first_turn_tokens = std::max<int64_t>(
        8, static_cast<int64_t>(static_cast<double>(spec.first_turn_tokens) * scale));
    spec.followup_tokens = std::max<int64_t>(
        4, static_cast<int64_t>(static_cast<double>(spec.followup_tokens) * scale));
    TG_ASSIGN(conversations, generate_workload(spec));
    longest = longest_conversation(conversations);
  }
  fmt::print(stderr,
             "note: messages shortened to fit the model's context of {} tokens: first {} -> {}, "
             "later {} -> {}\n",
             context, first, spec.first_turn_tokens, followup, spec.followup_tokens);
  return Status::Ok();
}

// The per-head profile tangram runs with (`path`, else the shipped real one of --profile-dir and
// --profile-model), cut to the model's layers and saved under the report folder for the engine
// to load.
Result<RetentionProfile> fit_profile(const BenchOptions& opt, std::string path,
                                     const ModelConfig& cfg, const std::string& fitted_path) {
  if (path.empty())
    path = (data_dir() / "profiles" / opt.profile_dir / opt.profile_model / "profile_perlayer.json")
               .string();
  auto profile = load_profile(path);
  if (!profile)
    return make_error("{} (pass --profile; `tangram profile` makes one)", profile.message());
  TG_ASSIGN(RetentionProfile fitted, profile_first_layers(*profile, cfg.n_layers));
  if (fitted.n_kv_head != cfg.n_kv_head || fitted.n_layers != cfg.n_layers)
    return make_error(
        "the profile {} is for {} layers x {} KV heads, the model has {} x {}: pass --profile "
        "(`tangram profile` makes one) or leave tangram out of --policies",
        path, profile->n_layers, profile->n_kv_head, cfg.n_layers, cfg.n_kv_head);
  TG_TRY(save_profile(fitted, fitted_path));
  return fitted;
}

// Full KV's bytes per token (every layer's KV heads, keys and values), without page rounding.
double dense_kv_bytes_per_token(const ModelConfig& cfg, const std::string& kv_type) {
  const KvType type = parse_kv_type(kv_type).value_or(KvType::F16);  // the flag was checked
  return static_cast<double>(cfg.n_layers) * cfg.n_kv_head *
         static_cast<double>(kv_row_bytes(type, cfg.head_dim) + kv_row_bytes(type, cfg.head_dim_v));
}

// The engine flags every run starts from: KV memory for `memory_sessions` conversations under
// full KV unless given, the scorer, compression points and the budget scaling's context.
EngineSettings base_engine_flags(const BenchOptions& opt, const ModelConfig& cfg,
                                 const WorkloadSpec& spec, int64_t longest) {
  const double kv_token = dense_kv_bytes_per_token(cfg, opt.engine.kv_type);
  EngineSettings base = opt.engine;
  if (base.kv_memory == "auto") {
    const double bytes =
        opt.memory_sessions * static_cast<double>(longest + 2 * base.page_tokens) * kv_token;
    base.kv_memory = fmt::format("{}", static_cast<uint64_t>(bytes));
  }
  base.kv_scorer = opt.scorer;
  // Compression points every quarter of the first message (as the reference's 8192-token chunks
  // are to its ~25k-token prompts), so tangram's admitted peak is a fraction of the prompt.
  if (base.kv_chunk <= 0)
    base.kv_chunk =
        std::max<int64_t>(2 * base.kv_window + 1, (spec.first_turn_tokens / 4 + 63) / 64 * 64);
  // Tangram's budgets commit --kv-ratio of full KV at the first message's length, the context
  // every conversation is compressed at first.
  if (base.kv_budget_context <= 0) base.kv_budget_context = spec.first_turn_tokens;
  base.max_running = std::max(base.max_running, spec.concurrency);
  return base;
}

Result<BenchSetup> set_up(const BenchOptions& opt) {
  TG_TRY(check_bench_flags(opt));
  BenchSetup s;
  TG_ASSIGN(s.spec, workload_spec(opt));
  TG_ASSIGN(s.loaded, load_model_for_serving(opt.model, opt.preset, opt.type,
                                             opt.model.empty() ? opt.layers : 0, opt.cache_dir,
                                             opt.engine.threads, model_options_for(opt.engine)));
  const ModelConfig& cfg = s.loaded.model->config();
  const Tokenizer& tok = *s.loaded.tokenizer;
  s.spec.vocab = static_cast<int32_t>(std::min<int64_t>(cfg.vocab, tok.n_vocab()));
  TG_ASSIGN(s.conversations, load_conversations(opt, s.spec, tok));
  TG_TRY(check_token_range(s.conversations, static_cast<int32_t>(cfg.vocab)));
  s.longest = longest_conversation(s.conversations);
  if (s.longest + 8 > cfg.context_length && opt.trace.empty() && opt.first_turn_tokens == 0 &&
      opt.followup_tokens == 0)
    TG_TRY(shrink_messages_to_context(s.spec, cfg.context_length, s.conversations, s.longest));
  if (s.longest + 8 > cfg.context_length)
    return make_error(
        "a conversation reaches {} tokens, past the model's context of {}: shorten the workload",
        s.longest, cfg.context_length);
  // The report folder first: the fitted profile goes there.
  TG_TRY(prepare_report_dir(opt.output));
  const std::string dir =
      opt.output.out_dir.empty() ? fs::temp_directory_path().string() : opt.output.out_dir;
  s.profile_path = (fs::path(dir) / "profile.json").string();
  s.base = base_engine_flags(opt, cfg, s.spec, s.longest);
  if (std::find(opt.policies.begin(), opt.policies.end(), "tangram") != opt.policies.end()) {
    // A real model's profile comes from its own text unless one is given: another model's
    // budgets would say nothing about this one's heads.
    std::string source = opt.profile;
    if (source.empty() && !opt.model.empty()) {
      ThreadPool pool(s.base.threads);
      TG_ASSIGN(source, profile_from_own_text(opt, s.loaded, s.base, dir, pool));
      s.accuracy_info.profile_source =
          fmt::format("`tangram profile` on the model's own text ({})", source);
    }
    TG_ASSIGN(RetentionProfile fitted, fit_profile(opt, source, cfg, s.profile_path));
    if (s.accuracy_info.profile_source.empty())
      s.accuracy_info.profile_source = source.empty() ? "the preset's" : source;
    s.profile = std::move(fitted);
  }
  // On random weights the comparison against full KV says nothing of accuracy: only when asked,
  // as a numerical check.
  s.accuracy_info.random_weights = opt.model.empty();
  if (opt.accuracy && (!opt.model.empty() || opt.numerical_check)) {
    TG_ASSIGN(AccuracyWorkload w,
              accuracy_workload_for(opt, tok, cfg.context_length, s.accuracy_info));
    s.accuracy = std::move(w);
  }
  // Planted facts need a model that follows a chat: on by default with -m when the model carries
  // a chat template (a base model such as a story writer has none and cannot answer).
  s.n_facts =
      opt.facts >= 0 ? opt.facts : (!opt.model.empty() && !tok.chat_template().empty() ? 4 : 0);
  if (opt.facts < 0 && !opt.model.empty() && s.n_facts == 0)
    fmt::print(
        stderr,
        "note: planted facts off: the model has no chat template (--facts N runs them anyway)\n");
  if (s.n_facts > 0) {
    TG_ASSIGN(ChatTemplate t, pick_chat_template("", tok));
    s.chat_template = std::move(t);
  }
  TG_ASSIGN(s.task, set_up_task(opt, dir));
  return s;
}

}  // namespace

Status check_bench_flags(const BenchOptions& opt) {
  if (opt.numerical_check && !opt.model.empty())
    return make_error(
        "--numerical-check is for the generated model: with -m the comparison against full KV "
        "runs anyway (--no-accuracy skips it)");
  if (opt.numerical_check && !opt.accuracy)
    return make_error("--numerical-check runs the comparison --no-accuracy skips: give one");
  if (opt.ttft_limit && opt.rates.empty())
    return make_error("--ttft-limit judges the --rates runs: give --rates");
  if (opt.task_model.empty()) {
    if (!opt.task_set.empty()) return make_error("--task-set needs --task-model");
    if (opt.task_conversations >= 0) return make_error("--task-conversations needs --task-model");
    if (!opt.task_profile.empty()) return make_error("--task-profile needs --task-model");
  }
  return Status::Ok();
}

std::vector<RunPlan> plan_runs(const BenchOptions& opt) {
  // Dynamic's extra ratios, only when there is another compressing policy to compare with it.
  const bool bracket =
      opt.dynamic_bracket > 0 &&
      std::any_of(opt.policies.begin(), opt.policies.end(),
                  [](const std::string& p) { return p != "full" && p != "dynamic"; });
  std::vector<double> dynamic_ratios = opt.ratios;
  if (bracket)
    for (double r : opt.ratios) {
      const double low =
          std::round(r * opt.dynamic_bracket * 1000.0) / 1000.0;  // 0.25 x 0.6 prints 0.15
      const bool listed = std::any_of(dynamic_ratios.begin(), dynamic_ratios.end(),
                                      [&](double d) { return std::abs(d - low) < 1e-9; });
      if (low > 0 && !listed) dynamic_ratios.push_back(low);
    }
  std::vector<RunPlan> plans;
  for (const std::string& p : opt.policies) {
    if (p == "full") {
      plans.push_back({p, 1.0, 0});
      continue;
    }
    for (double r : p == "dynamic" ? dynamic_ratios : opt.ratios) {
      if (p == "tangram")
        for (int g : opt.group_sizes) plans.push_back({p, r, g});
      else
        plans.push_back({p, r, 0});
    }
  }
  return plans;
}

namespace {

EngineSettings plan_flags(const BenchSetup& s, const RunPlan& plan) {
  EngineSettings f = s.base;
  f.kv_policy = plan.policy;
  f.kv_ratio = plan.ratio;
  f.kv_profile = plan.policy == "tangram" ? s.profile_path : "";
  f.page_group_size = plan.policy == "tangram" ? plan.group_size : 0;
  return f;
}

void measure_planted_facts(const BenchSetup& s, const BenchOptions& opt, const EngineOptions& eo,
                           RunRow& row) {
  PlantedFactsOptions po;
  po.seed = opt.seed;
  po.n_facts = s.n_facts;
  po.filler_words = 300;  // shrunk to fit the context by run_planted_facts
  EngineOptions facts_engine = eo;
  facts_engine.threads = s.base.threads;
  auto score =
      run_planted_facts(*s.loaded.model, *s.loaded.tokenizer, *s.chat_template, facts_engine, po);
  if (score)
    row.facts = *score;
  else
    fmt::print(stderr, "note: planted facts of {} at {} not measured: {}\n", row.policy, row.ratio,
               score.message());
}

// One plan through the scheduler, then its accuracy and planted facts.
Result<RunRow> run_plan(const BenchSetup& s, const BenchOptions& opt, const RunPlan& plan,
                        ThreadPool& pool,
                        const std::function<void(int64_t, int64_t)>& on_progress) {
  TG_ASSIGN(EngineOptions eo, to_engine_options(plan_flags(s, plan)));
  auto run = run_workload(*s.loaded.model, *s.loaded.tokenizer, pool, eo.scheduler, s.conversations,
                          s.spec, on_progress, eo.sessions);
  if (!run) return make_error("{} at ratio {}: {}", plan.policy, plan.ratio, run.message());
  RunRow row;
  row.policy = plan.policy;
  row.ratio = plan.ratio;
  row.group_size = eo.scheduler.page_group_size;
  TG_ASSIGN(row.metrics, compute_run_metrics(run->records, run->wall_s));
  row.run = std::move(run).value();
  // The closed-form retention of the policy at the context its budgets are scaled at.
  const CompressionOptions& co = eo.scheduler.compression;
  TG_ASSIGN(auto compressor,
            Compressor::create(co, s.loaded.model->config(), s.loaded.model->rope(),
                               eo.scheduler.page_group_size));
  row.retention_context = co.budget_reference();
  row.committed = compressor->retention_at(row.retention_context);
  if (s.accuracy)
    measure_accuracy(*s.loaded.model, *s.loaded.tokenizer, *s.accuracy, eo, pool, row);
  if (s.chat_template) measure_planted_facts(s, opt, eo, row);
  if (s.task) measure_task(*s.task, opt, plan, row);
  return row;
}

Result<std::vector<RunRow>> run_plans(const BenchSetup& s, const BenchOptions& opt,
                                      const std::vector<RunPlan>& plans, ThreadPool& pool) {
  int64_t total_turns = 0;
  for (const auto& c : s.conversations) total_turns += static_cast<int64_t>(c.turns.size());
  ProgressBar bar("benchmark", static_cast<int64_t>(plans.size()) * total_turns);
  std::vector<RunRow> rows;
  int64_t done_before = 0;
  for (const RunPlan& plan : plans) {
    TG_ASSIGN(RunRow row, run_plan(s, opt, plan, pool,
                                   [&](int64_t d, int64_t) { bar.update(done_before + d); }));
    done_before += total_turns;
    rows.push_back(std::move(row));
  }
  return rows;
}

// The flags the restore probes and the oversubscribed workload run under: the reference tangram
// run's, else uniform at 25% (a compressed session, as serving keeps it).
EngineSettings restore_flags(const BenchSetup& s, const std::vector<RunRow>& rows) {
  if (const RunRow* t = reference_tangram_run(rows))
    return plan_flags(s, {t->policy, t->ratio, t->group_size});
  return plan_flags(s, {"uniform", 0.25, 0});
}

// Time to restore an idle conversation from the tiers against re-prefilling it: with
// --restore-contexts from host memory and disk at each length, else from host memory at the first
// message's length (a trace has no single one: nothing then) under the reference tangram run.
Status measure_restores(const BenchSetup& s, const BenchOptions& opt, MultiturnResults& r) {
  const EngineSettings flags = restore_flags(s, r.rows);
  r.restore_policy = fmt::format("{} {:.2f}", flags.kv_policy, flags.kv_ratio);
  if (opt.restore_contexts.empty()) {
    if (!reference_tangram_run(r.rows) || !opt.trace.empty()) return Status::Ok();
    TG_ASSIGN(HostRestoreTiming t,
              measure_host_restore(*s.loaded.model, *s.loaded.tokenizer, flags,
                                   s.spec.first_turn_tokens, static_cast<uint32_t>(opt.seed)));
    r.restore = t;
    return Status::Ok();
  }
  const std::string disk =
      opt.disk_dir.empty()
          ? (fs::temp_directory_path() / fmt::format("tangram-restore-{}", ::getpid())).string()
          : opt.disk_dir;
  ProgressBar bar("restore", static_cast<int64_t>(opt.restore_contexts.size()));
  for (const int64_t n : opt.restore_contexts) {
    bar.add();
    if (n + 2 > r.config.context_length) {
      fmt::print(stderr, "note: restore context {} skipped: the model holds {}\n", n,
                 r.config.context_length);
      continue;
    }
    TG_ASSIGN(HostRestoreTiming t, measure_host_restore(*s.loaded.model, *s.loaded.tokenizer, flags,
                                                        n, static_cast<uint32_t>(n)));
    TG_TRY(measure_disk_restore(*s.loaded.model, *s.loaded.tokenizer, flags, disk,
                                static_cast<uint32_t>(n), t));
    r.restore_contexts.push_back(t);
  }
  return Status::Ok();
}

// --oversubscription X: the conversations of the workload in a pool that holds 1/X of them.
Status run_oversubscription(const BenchSetup& s, const BenchOptions& opt, MultiturnResults& r) {
  if (opt.oversubscription <= 0) return Status::Ok();
  OversubscribedOptions o;
  o.sessions = s.spec.sessions;
  o.oversubscription = opt.oversubscription;
  o.turns = s.spec.turns;
  o.first_tokens = s.spec.first_turn_tokens;
  o.followup_tokens = s.spec.followup_tokens;
  o.gen_tokens = static_cast<int>(s.spec.output_tokens);
  o.concurrency = s.spec.concurrency;
  o.disk_dir = opt.disk_dir;
  TG_ASSIGN(r.oversubscribed,
            run_oversubscribed(*s.loaded.model, *s.loaded.tokenizer, restore_flags(s, r.rows), o));
  return Status::Ok();
}

// TTFT vs request rate and goodput: every run open loop at each --rates.
Result<std::optional<RateSweep>> sweep_rates(const BenchSetup& s, const BenchOptions& opt,
                                             std::vector<RunRow>& rows, ThreadPool& pool) {
  if (opt.rates.empty()) return std::optional<RateSweep>();
  if (!opt.trace.empty()) {
    fmt::print(
        stderr,
        "note: --rates needs a generated workload (a trace has its own arrival times); skipped\n");
    return std::optional<RateSweep>();
  }
  std::vector<SweptPolicy> runs;
  for (const RunRow& r : rows) {
    TG_ASSIGN(EngineOptions eo,
              to_engine_options(plan_flags(s, {r.policy, r.ratio, r.group_size})));
    runs.push_back({r.policy, r.ratio, r.group_size, eo.scheduler});
  }
  TG_ASSIGN(RateSweep sweep,
            run_rate_sweep(*s.loaded.model, *s.loaded.tokenizer, pool, s.spec, opt.rates, runs,
                           opt.ttft_limit.value_or(kDefaultTtftLimit)));
  for (size_t i = 0; i < rows.size() && i < sweep.goodput.size(); ++i)
    rows[i].goodput = sweep.goodput[i];
  return std::optional<RateSweep>(std::move(sweep));
}

// How conversations arrive and pause, for the run's header line.
std::string arrival_summary(const WorkloadSpec& spec) {
  std::string a = spec.arrival == WorkloadSpec::Arrival::OpenLoop
                      ? fmt::format("arriving at {}/s", spec.request_rate)
                      : fmt::format("concurrency {}", spec.concurrency);
  if (spec.think_time_s > 0)
    a += fmt::format(
        ", think time {}{} s",
        spec.think_time_dist == WorkloadSpec::ThinkTime::Exponential ? "exponential, mean " : "",
        spec.think_time_s);
  return a;
}

}  // namespace

Status run_multiturn_bench(const BenchOptions& opt) {
  TG_ASSIGN(BenchSetup s, set_up(opt));
  std::FILE* console = opt.output.console();
  const ModelConfig& cfg = s.loaded.model->config();
  const std::vector<RunPlan> plans = plan_runs(opt);
  MultiturnResults r;
  r.model_path = s.loaded.path;
  r.config = cfg;
  r.spec = s.spec;
  r.kv_memory_bytes = static_cast<int64_t>(*parse_bytes(s.base.kv_memory));
  r.facts_per_conversation = s.n_facts;
  r.dense_kv_bytes_per_token = dense_kv_bytes_per_token(cfg, s.base.kv_type);
  r.profile = s.profile;
  r.accuracy = s.accuracy_info;
  if (s.task) r.task = s.task->info;
  fmt::print(console,
             "tangram bench: {} ({} layers, {} x {} KV heads x {}), workload {} ({} sessions x {} "
             "turns, first "
             "turn {} tokens, {}), KV memory {}, {} runs\n",
             r.model_path, cfg.n_layers, cfg.n_head, cfg.n_kv_head, cfg.head_dim, s.spec.preset,
             s.spec.sessions, s.spec.turns, s.spec.first_turn_tokens, arrival_summary(s.spec),
             format_bytes(static_cast<double>(r.kv_memory_bytes)), plans.size());
  ThreadPool pool(s.base.threads);
  r.threads = pool.size();
  TG_ASSIGN(r.rows, run_plans(s, opt, plans, pool));
  print_runs_table(r, console);
  print_service_table(r, console);
  TG_TRY(measure_restores(s, opt, r));
  print_restore(r, console);
  TG_TRY(run_oversubscription(s, opt, r));
  TG_ASSIGN(r.sweep, sweep_rates(s, opt, r.rows, pool));
  if (r.sweep) print_rate_sweep(*r.sweep, console);
  fmt::print(console, "\n{}\n", multiturn_verdict(r));
  return write_report(multiturn_report(r, opt.policies), opt.output);
}

}  // namespace tangram::bench
