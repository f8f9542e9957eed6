// `tangram bench`'s flags; the benchmark itself is bench::run_multiturn_bench
// (src/benchmark/multiturn_bench.cpp).
#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/cli_error.h"
#include "cli/command.h"
#include "cli/commands.h"
#include "cli/config_json.h"
#include "cli/engine_flags.h"

namespace tangram::cli {

int cmd_bench(const BenchOptions& opt) {
  if (Status st = bench::run_multiturn_bench(opt); !st) return fail(st.message());
  return 0;
}

namespace {

// Engine flags that bench sets for each run from its list-valued sweeps: given once they would be
// overwritten, so they are refused with the flag to use instead.
void refuse_swept_flags(const CLI::App& c) {
  static constexpr std::pair<const char*, const char*> kSwept[] = {
      {"--kv-policy", "--policies"},
      {"--kv-ratio", "--ratios"},
      {"--page-group-size", "--group-sizes"},
      {"--kv-scorer", "--scorer"},
      {"--kv-profile", "--profile"}};
  for (const auto& [flag, use] : kSwept)
    if (c.count(flag) > 0)
      throw CLI::ValidationError(
          flag, fmt::format("bench sets it for each run: use {} (a list) instead", use));
  if (c.count("--profile-cache") > 0)
    throw CLI::ValidationError("--profile-cache",
                               "bench makes tangram's profile from the model's own text in its -o "
                               "folder (or takes --profile): no cache is read");
}

}  // namespace

Command register_bench(CLI::App& app) {
  auto opt = std::make_shared<BenchOptions>();
  BenchOptions& bench = *opt;
  bench.engine.kv_memory = "auto";
  bench.engine.kv_chunk = 0;  // auto: a quarter of the first message
  auto* c_bench = app.add_subcommand("bench",
                                     "Multi-turn serving benchmark: full, uniform, dynamic and "
                                     "tangram KV side by side (the main job)");
  c_bench
      ->add_option("-m,--model", bench.model,
                   "Benchmark this GGUF instead of the generated default")
      ->check(CLI::ExistingFile);
  c_bench->add_option("--preset", bench.preset, "Attention shape of the generated model")
      ->capture_default_str();
  c_bench->add_option("--type", bench.type, "Weight type of the generated model")
      ->capture_default_str();
  c_bench->add_option("--layers", bench.layers, "Layers of the generated model (0: the preset's)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c_bench->add_option("--cache-dir", bench.cache_dir, "Where generated models are kept");
  c_bench
      ->add_option("--workload", bench.workload,
                   "Preset: service (many conversations arriving over time, "
                   "idle between turns for seeded think times), scbench (shared long context, "
                   "follow-up questions), "
                   "locomo (long chat histories), sharegpt (short chat)")
      ->capture_default_str()
      ->check(CLI::IsMember({"service", "scbench", "locomo", "sharegpt"}));
  c_bench->add_option("--trace", bench.trace, "Replay a JSONL trace of conversations (see README)")
      ->check(CLI::ExistingFile);
  c_bench
      ->add_option("--conversations", bench.conversations, "Conversations (default: the preset's)")
      ->check(CLI::NonNegativeNumber);
  c_bench->add_option("--turns", bench.turns, "Turns per conversation")
      ->check(CLI::NonNegativeNumber);
  c_bench
      ->add_option("--concurrency", bench.concurrency, "Conversations active at once (closed loop)")
      ->check(CLI::NonNegativeNumber);
  c_bench->add_option("--first-turn-tokens", bench.first_turn_tokens, "First message length")
      ->check(CLI::NonNegativeNumber);
  c_bench->add_option("--followup-tokens", bench.followup_tokens, "Length of each later message")
      ->check(CLI::NonNegativeNumber);
  c_bench->add_option("--gen-tokens", bench.gen_tokens, "Tokens generated per turn")
      ->check(CLI::NonNegativeNumber);
  c_bench->add_option("--rate", bench.rate, "Open loop: new conversations per second (Poisson)")
      ->check(CLI::NonNegativeNumber);
  c_bench
      ->add_option("--rates", bench.rates,
                   "Also run every policy and ratio open loop at each of these rates (new "
                   "conversations per second): TTFT vs request rate (ttft_vs_rate.svg) and each "
                   "run's goodput, the highest rate it sustains within --ttft-limit")
      ->delimiter(',');
  c_bench
      ->add_option("--ttft-limit", bench.ttft_limit,
                   "With --rates: the TTFT p90, in seconds, a run must keep to sustain a rate "
                   "(default 2)")
      ->check(CLI::PositiveNumber);
  c_bench
      ->add_option("--think-time", bench.think_time,
                   "Mean seconds a user thinks before each follow-up (service: drawn exponential; "
                   "default: the "
                   "preset's)")
      ->check(CLI::NonNegativeNumber);
  c_bench->add_option("--seed", bench.seed, "Workload seed")->capture_default_str();
  c_bench->add_option("--policies", bench.policies, "Policies to run")
      ->capture_default_str()
      ->delimiter(',');
  c_bench->add_option("--ratios", bench.ratios, "Retention ratios")
      ->capture_default_str()
      ->delimiter(',');
  c_bench
      ->add_option("--dynamic-bracket", bench.dynamic_bracket,
                   "Dynamic also runs at each ratio times this, so that its runs bracket the other "
                   "policies' "
                   "effective retention and x dynamic at equal retention interpolates (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  c_bench->add_option("--group-sizes", bench.group_sizes, "Head-group sizes for tangram")
      ->capture_default_str()
      ->delimiter(',');
  c_bench->add_option("--scorer", bench.scorer, "Scorer of the compressing policies")
      ->capture_default_str();
  c_bench
      ->add_option("--profile", bench.profile,
                   "Per-head profile for tangram (default: with -m, made by `tangram profile` from "
                   "the model's own text; "
                   "else the real one of the preset's model)")
      ->check(CLI::ExistingFile);
  c_bench->add_option("--profile-dir", bench.profile_dir, "Scorer folder of data/profiles")
      ->capture_default_str();
  c_bench->add_option("--profile-model", bench.profile_model, "Model folder of data/profiles")
      ->capture_default_str();
  c_bench
      ->add_option("--memory-sessions", bench.memory_sessions,
                   "With --kv-memory auto: KV for this many conversations under full KV")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c_bench->add_flag("!--no-accuracy", bench.accuracy,
                    "Skip the accuracy comparison against full KV (with -m)");
  c_bench->add_flag("--numerical-check", bench.numerical_check,
                    "With the generated model (random weights), also compare every policy "
                    "against full KV as a numerical check of its paths (its figures are not "
                    "accuracy)");
  c_bench
      ->add_option("--task-model", bench.task_model,
                   "Measure task accuracy (exact recall on held-out multi-turn conversations) "
                   "of every policy and ratio on this real chat model")
      ->check(CLI::ExistingFile);
  c_bench
      ->add_option("--task-set", bench.task_set,
                   "The task's conversations (default: the shipped held-out set, "
                   "data/eval/recall-heldout.jsonl)")
      ->check(CLI::ExistingFile);
  c_bench
      ->add_option("--task-conversations", bench.task_conversations,
                   "Only the first N conversations of the task (default: all; 24 with --quick)")
      ->check(CLI::NonNegativeNumber);
  c_bench
      ->add_option("--task-profile", bench.task_profile,
                   "Tangram's profile of the task model (default: made once from the "
                   "calibration text, kept in the report folder)")
      ->check(CLI::ExistingFile);
  c_bench
      ->add_option("--accuracy-text", bench.accuracy_text,
                   "Text the accuracy runs read (default: the built-in short stories, "
                   "docs/accuracy-text.txt)")
      ->check(CLI::ExistingFile);
  c_bench
      ->add_option("--accuracy-tokens", bench.accuracy_tokens,
                   "Most tokens of the accuracy text read per policy (also cut to the model's "
                   "context and -c)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{64}, int64_t{1} << 20));
  c_bench
      ->add_option(
          "--facts", bench.facts,
          "Planted facts in a long chat, asked back later and scored by exact match, per policy "
          "(needs a real chat model: default 4 with -m when the model has a chat template, else 0 "
          "= off)")
      ->check(CLI::Range(-1, 144));
  c_bench
      ->add_option("--restore-contexts", bench.restore_contexts,
                   "Time to restore an idle conversation of each length from host memory and disk "
                   "vs re-prefill")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  c_bench->add_option("--disk-dir", bench.disk_dir,
                      "Where the disk tier is measured (default: a temp folder)");
  c_bench
      ->add_option("--oversubscription", bench.oversubscription,
                   "Also run the conversations in a KV pool holding 1/X of them: no tier, host "
                   "tier, disk tier")
      ->check(CLI::NonNegativeNumber);
  c_bench->add_flag("--quick", bench.quick, "A small workload: the whole run in a few minutes");
  c_bench
      ->add_option("-o,--out", bench.output.out_dir,
                   "Folder for report.json, report.md and the plots")
      ->capture_default_str();
  c_bench->add_flag("--json", bench.output.json_stdout,
                    "Print report.json on stdout (the tables go to stderr)");
  add_engine_options(c_bench, bench.engine);
  c_bench->parse_complete_callback([c_bench] { refuse_swept_flags(*c_bench); });
  return {c_bench, [opt] { return cmd_bench(*opt); }, [opt] { return plan_json(*opt); }};
}

}  // namespace tangram::cli
