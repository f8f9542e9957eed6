// `tangram bench`: the multi-turn serving benchmark, every KV policy side by side on the same
// model, the same workload and the same KV memory, everything measured in this run.
//
// For each retention ratio and each policy (full once, at ratio 1) the workload runs through
// the real scheduler (evaluation/runner.h); the report gives throughput, latency percentiles,
// admitted concurrency, KV memory and waste, preemptions, compression and reclamation time,
// attention load imbalance and session reuse, plus each policy's accuracy cost against full KV
// (greedy agreement and next-token KL on a fixed continuation). The pipeline: set up (workload,
// model, profile, engine flags), run and measure every plan, then the restore probe and the rate
// sweep, then the report (bench_multiturn_report.cpp; the output convention of bench_report.h).
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "cli/bench_models.h"
#include "cli/bench_multiturn.h"
#include "cli/chat_prompt.h"
#include "cli/cli_error.h"
#include "common/progress.h"
#include "common/units.h"
#include "evaluation/trace.h"

namespace tangram::cli {
namespace {

namespace fs = std::filesystem;

// What every run shares: the model, the conversations and the engine flags they start from.
struct BenchSetup {
  LoadedModel loaded;
  WorkloadSpec spec;
  std::vector<Conversation> conversations;
  int64_t longest = 0;                       // longest conversation in tokens
  std::optional<RetentionProfile> profile;   // cut to the model's layers (tangram only)
  std::string profile_path;                  // where that cut is saved for the engine to load
  EngineFlags base;                          // the engine flags before each plan's policy is set
  std::optional<ChatTemplate> chat_template; // planted facts only
  int n_facts = 0;
};

Result<WorkloadSpec> workload_spec(const BenchOptions& opt) {
  TG_ASSIGN(WorkloadSpec spec, workload_preset(opt.workload));
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
  return spec;
}

// The trace's conversations (its text turns tokenised) or the generated workload's.
Result<std::vector<Conversation>> load_conversations(const BenchOptions& opt, WorkloadSpec& spec, const Tokenizer& tok) {
  if (opt.trace.empty()) return generate_workload(spec);
  TG_ASSIGN(std::vector<Conversation> conversations, load_trace(opt.trace));
  for (auto& c : conversations)
    for (auto& turn : c.turns)
      if (turn.user_tokens.empty() && !turn.user_text.empty()) {
        turn.user_tokens = tok.encode(turn.user_text, false, false);
        if (turn.user_tokens.empty()) return make_error("{}: a turn of {} encodes to no tokens", opt.trace, c.id);
      }
  spec.turns = 0;
  for (const auto& c : conversations) spec.turns = std::max(spec.turns, static_cast<int>(c.turns.size()));
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

// The per-head profile tangram runs with, cut to the model's layers and saved under the report
// folder for the engine to load.
Result<RetentionProfile> fit_profile(const BenchOptions& opt, const ModelConfig& cfg, const std::string& fitted_path) {
  std::string path = opt.profile;
  if (path.empty()) path = (shared_dir() / "profiles" / opt.profile_dir / opt.profile_model / "profile_perlayer.json").string();
  auto profile = load_profile(path);
  if (!profile) return make_error("{} (pass --profile; `tangram profile` makes one)", profile.message());
  TG_ASSIGN(RetentionProfile fitted, profile_first_layers(*profile, cfg.n_layers));
  if (fitted.n_kv_head != cfg.n_kv_head || fitted.n_layers != cfg.n_layers)
    return make_error("the profile {} is for {} layers x {} KV heads, the model has {} x {}: pass --profile "
                      "(`tangram profile` makes one) or leave tangram out of --policies",
                      path, profile->n_layers, profile->n_kv_head, cfg.n_layers, cfg.n_kv_head);
  TG_TRY(save_profile(fitted, fitted_path));
  return fitted;
}

// The engine flags every run starts from: KV memory for `memory_sessions` conversations under
// full KV unless given, the scorer, and compression points.
EngineFlags base_engine_flags(const BenchOptions& opt, const ModelConfig& cfg, const WorkloadSpec& spec, int64_t longest) {
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
  return base;
}

Result<BenchSetup> set_up(const BenchOptions& opt) {
  BenchSetup s;
  TG_ASSIGN(s.spec, workload_spec(opt));
  TG_ASSIGN(s.loaded, load_model_for_serving(opt.model, opt.preset, opt.type, opt.model.empty() ? opt.layers : 0,
                                             opt.cache_dir, opt.engine.threads, model_batch_for(opt.engine)));
  const ModelConfig& cfg = s.loaded.model->config();
  const Tokenizer& tok = *s.loaded.tokenizer;
  s.spec.vocab = static_cast<int32_t>(std::min<int64_t>(cfg.vocab, tok.n_vocab()));
  TG_ASSIGN(s.conversations, load_conversations(opt, s.spec, tok));
  TG_TRY(check_token_range(s.conversations, static_cast<int32_t>(cfg.vocab)));
  s.longest = longest_conversation(s.conversations);
  if (s.longest + 8 > cfg.context_length)
    return make_error("a conversation reaches {} tokens, past the model's context of {}: shorten the workload",
                      s.longest, cfg.context_length);
  // The report folder first: the fitted profile goes there.
  TG_TRY(prepare_report_dir(opt.output));
  s.profile_path = (fs::path(opt.output.out_dir.empty() ? fs::temp_directory_path().string() : opt.output.out_dir) /
                    "profile.json").string();
  if (std::find(opt.policies.begin(), opt.policies.end(), "tangram") != opt.policies.end()) {
    TG_ASSIGN(RetentionProfile fitted, fit_profile(opt, cfg, s.profile_path));
    s.profile = std::move(fitted);
  }
  s.base = base_engine_flags(opt, cfg, s.spec, s.longest);
  // Planted facts need a model that follows a chat: on by default with -m only.
  s.n_facts = opt.facts >= 0 ? opt.facts : (opt.model.empty() ? 0 : 4);
  if (s.n_facts > 0) {
    TG_ASSIGN(ChatTemplate t, pick_chat_template("", tok));
    s.chat_template = std::move(t);
  }
  return s;
}

// Every (policy, ratio, group size) of the lists; full once, at ratio 1.
std::vector<RunPlan> plan_runs(const BenchOptions& opt) {
  std::vector<RunPlan> plans;
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
  return plans;
}

EngineFlags plan_flags(const BenchSetup& s, const RunPlan& plan) {
  EngineFlags f = s.base;
  f.kv_policy = plan.policy;
  f.kv_ratio = plan.ratio;
  f.kv_profile = plan.policy == "tangram" ? s.profile_path : "";
  f.page_group_size = plan.policy == "tangram" ? plan.group_size : 0;
  return f;
}

// Greedy agreement and KL against full KV on a fixed context (the first conversation's first
// message) and continuation (its second).
void measure_accuracy(const BenchSetup& s, const EngineOptions& eo, ThreadPool& pool, RunRow& row) {
  const auto& c0 = s.conversations.front();
  std::vector<int32_t> ctx = c0.turns.front().user_tokens;
  std::vector<int32_t> cont;
  if (c0.turns.size() > 1) cont = c0.turns[1].user_tokens;
  if (cont.size() > 64) cont.resize(64);
  if (cont.size() < 2)
    cont = std::vector<int32_t>(ctx.end() - std::min<std::ptrdiff_t>(16, static_cast<std::ptrdiff_t>(ctx.size())), ctx.end());
  auto acc = policy_agreement(*s.loaded.model, eo.scheduler.compression, row.group_size > 0 ? row.group_size : -1,
                              eo.scheduler.page_tokens, ctx, cont, 16, pool);
  if (acc)
    row.accuracy = *acc;
  else
    fmt::print(stderr, "note: accuracy of {} at {} not measured: {}\n", row.policy, row.ratio, acc.message());
}

void measure_planted_facts(const BenchSetup& s, const BenchOptions& opt, const EngineOptions& eo, RunRow& row) {
  PlantedFactsOptions po;
  po.seed = opt.seed;
  po.n_facts = s.n_facts;
  po.filler_words = 300;  // shrunk to fit the context by run_planted_facts
  EngineOptions facts_engine = eo;
  facts_engine.threads = s.base.threads;
  auto score = run_planted_facts(*s.loaded.model, *s.loaded.tokenizer, *s.chat_template, facts_engine, po);
  if (score)
    row.facts = *score;
  else
    fmt::print(stderr, "note: planted facts of {} at {} not measured: {}\n", row.policy, row.ratio, score.message());
}

// One plan through the scheduler, then its accuracy and planted facts.
Result<RunRow> run_plan(const BenchSetup& s, const BenchOptions& opt, const RunPlan& plan, ThreadPool& pool,
                        const std::function<void(int64_t, int64_t)>& on_progress) {
  TG_ASSIGN(EngineOptions eo, to_engine_options(plan_flags(s, plan)));
  auto run = run_workload(*s.loaded.model, *s.loaded.tokenizer, pool, eo.scheduler, s.conversations, s.spec, on_progress);
  if (!run) return make_error("{} at ratio {}: {}", plan.policy, plan.ratio, run.message());
  RunRow row;
  row.policy = plan.policy;
  row.ratio = plan.ratio;
  row.group_size = eo.scheduler.page_group_size;
  TG_ASSIGN(row.metrics, compute_run_metrics(run->records, run->wall_s));
  row.run = std::move(run).value();
  if (opt.accuracy && !s.conversations.empty()) measure_accuracy(s, eo, pool, row);
  if (s.chat_template) measure_planted_facts(s, opt, eo, row);
  return row;
}

Result<std::vector<RunRow>> run_plans(const BenchSetup& s, const BenchOptions& opt, const std::vector<RunPlan>& plans,
                                      ThreadPool& pool) {
  int64_t total_turns = 0;
  for (const auto& c : s.conversations) total_turns += static_cast<int64_t>(c.turns.size());
  ProgressBar bar("benchmark", static_cast<int64_t>(plans.size()) * total_turns);
  std::vector<RunRow> rows;
  int64_t done_before = 0;
  for (const RunPlan& plan : plans) {
    TG_ASSIGN(RunRow row, run_plan(s, opt, plan, pool, [&](int64_t d, int64_t) { bar.update(done_before + d); }));
    done_before += total_turns;
    rows.push_back(std::move(row));
  }
  return rows;
}

// Time to restore an idle conversation (its first message, compressed by the reference tangram
// run's policy) from the host tier, against re-prefilling it. A trace has no single first-message
// length: nothing to measure then.
Result<std::optional<HostRestoreTiming>> measure_restore(const BenchSetup& s, const BenchOptions& opt,
                                                         const std::vector<RunRow>& rows) {
  const RunRow* tangram = reference_tangram_run(rows);
  if (!tangram || !opt.trace.empty()) return std::optional<HostRestoreTiming>();
  TG_ASSIGN(HostRestoreTiming t, measure_host_restore(*s.loaded.model, *s.loaded.tokenizer,
                                                      plan_flags(s, {tangram->policy, tangram->ratio, tangram->group_size}),
                                                      s.spec.first_turn_tokens, static_cast<uint32_t>(opt.seed)));
  return std::optional<HostRestoreTiming>(t);
}

// TTFT vs request rate: full and the reference tangram run, open loop at each --rates.
Result<std::optional<RateSweep>> sweep_rates(const BenchSetup& s, const BenchOptions& opt,
                                             const std::vector<RunRow>& rows, ThreadPool& pool) {
  if (opt.rates.empty()) return std::optional<RateSweep>();
  if (!opt.trace.empty()) {
    fmt::print(stderr, "note: --rates needs a generated workload (a trace has its own arrival times); skipped\n");
    return std::optional<RateSweep>();
  }
  const RunRow* full = full_run(rows);
  const RunRow* tangram = reference_tangram_run(rows);
  if (!full || !tangram) {
    fmt::print(stderr, "note: --rates compares full and tangram: put both in --policies\n");
    return std::optional<RateSweep>();
  }
  std::vector<std::pair<std::string, SchedulerOptions>> policies;
  for (const RunRow* r : {full, tangram}) {
    TG_ASSIGN(EngineOptions eo, to_engine_options(plan_flags(s, {r->policy, r->ratio, r->group_size})));
    policies.emplace_back(r->policy, eo.scheduler);
  }
  TG_ASSIGN(RateSweep sweep, run_rate_sweep(*s.loaded.model, *s.loaded.tokenizer, pool, s.spec, opt.rates, policies));
  return std::optional<RateSweep>(std::move(sweep));
}

Status run_bench(const BenchOptions& opt) {
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
  r.profile = s.profile;
  fmt::print(console, "tangram bench: {} ({} layers, {} x {} KV heads x {}), workload {} ({} sessions x {} turns, first "
             "turn {} tokens, concurrency {}), KV memory {}, {} runs\n",
             r.model_path, cfg.n_layers, cfg.n_head, cfg.n_kv_head, cfg.head_dim, s.spec.preset, s.spec.sessions,
             s.spec.turns, s.spec.first_turn_tokens, s.spec.concurrency,
             format_bytes(static_cast<double>(r.kv_memory_bytes)), plans.size());
  ThreadPool pool(s.base.threads);
  r.threads = pool.size();
  TG_ASSIGN(r.rows, run_plans(s, opt, plans, pool));
  print_runs_table(r, console);
  TG_ASSIGN(r.restore, measure_restore(s, opt, r.rows));
  print_restore(r, console);
  TG_ASSIGN(r.sweep, sweep_rates(s, opt, r.rows, pool));
  if (r.sweep) print_rate_sweep(*r.sweep, console);
  fmt::print(console, "\n{}\n", multiturn_verdict(r));
  return write_report(multiturn_report(r, opt.policies, opt.ratios), opt.output);
}

}  // namespace

int cmd_bench(const BenchOptions& opt) {
  if (auto st = run_bench(opt); !st) return fail(st.message());
  return 0;
}

}  // namespace tangram::cli
