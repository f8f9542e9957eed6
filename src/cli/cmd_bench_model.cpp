// `tangram bench-model`'s flags; the benchmark itself is bench::run_model_bench
// (src/benchmark/model_bench.cpp).
#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/cli_error.h"
#include "cli/command.h"
#include "cli/commands.h"
#include "cli/config_json.h"
#include "cli/engine_flags.h"

namespace tangram::cli {

int cmd_bench_model(const BenchModelOptions& opt) {
  if (Status st = bench::run_model_bench(opt); !st) return fail(st.message());
  return 0;
}

Command register_bench_model(CLI::App& app) {
  auto opt = std::make_shared<BenchModelOptions>();
  BenchModelOptions& bm = *opt;
  auto* c_bm = app.add_subcommand(
      "bench-model",
      "Prefill and decode tok/s of the forward pass against the memory-bandwidth limit");
  c_bm->add_option("-m,--model", bm.model, "Benchmark this GGUF instead of generated models")
      ->check(CLI::ExistingFile);
  c_bm->add_option("--preset", bm.preset, "Shape of the generated models")->capture_default_str();
  c_bm->add_option("--types", bm.types, "Weight types of the generated models")
      ->capture_default_str()
      ->delimiter(',');
  c_bm->add_option("--prompt-tokens", bm.prompt_tokens, "Prompt length for prefill")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c_bm->add_option("--gen-tokens", bm.gen_tokens, "Tokens to decode")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c_bm->add_option("-t,--threads", bm.threads, "Threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  c_bm->add_option("--reps", bm.reps,
                   "Repetitions; the best is reported (default 2, 1 with --quick)")
      ->check(CLI::PositiveNumber);
  c_bm->add_option("--cache-dir", bm.cache_dir,
                   "Where generated models are kept (default ~/.cache/tangram/models)");
  c_bm->add_flag("!--no-llama-cpp", bm.llama_cpp, "Skip the llama.cpp comparison");
  add_mmap_flag(c_bm, bm.mmap);
  c_bm->add_option("--concurrency", bm.concurrency,
                   "Also decode this many sequences at once through the engine (continuous "
                   "batching), e.g. 1,2,4,8")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  c_bm->add_option("--context", bm.context,
                   "KV-bound decode instead: fill each of the --concurrency sequences to this many "
                   "positions with "
                   "synthetic KV written straight into the pages (no prefill) and time "
                   "--gen-tokens steps per policy")
      ->check(CLI::NonNegativeNumber);
  c_bm->add_option("--policies", bm.policies,
                   "KV policies of the --context runs: full, uniform, dynamic, tangram")
      ->delimiter(',')
      ->capture_default_str();
  c_bm->add_option("--kv-ratio", bm.kv_ratio,
                   "Retention of the compressing policies in --context runs (tangram fitted to "
                   "uniform's pages)")
      ->capture_default_str();
  c_bm->add_option("--profile", bm.profile,
                   "Per-head profile for dynamic and tangram in --context runs (default: the real "
                   "Qwen3-4B keydiff one, "
                   "cut to the model's layers)");
  c_bm->add_option(
          "--kv-type", bm.kv_types,
          "Page types of the --context runs, each under every policy: f16, f32, q8_0; e.g. "
          "f16,q8_0 compares "
          "quantized pages with full F16 in one run (\"vs full\" is over full on the first type)")
      ->delimiter(',')
      ->capture_default_str();
  c_bm->add_option("--page-tokens", bm.page_tokens,
                   "Token slots per KV page (P) in --context runs, every policy at the same P")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c_bm->add_option("--rounds", bm.rounds,
                   "Times every --context run is timed, round-robin over policies and page types "
                   "(each refilled), so "
                   "a slow spell of a shared machine falls on all of them: the report gives each "
                   "run's median round "
                   "and the range of its per-round ratio to full (default 3, 1 with --quick)")
      ->check(CLI::PositiveNumber);
  c_bm->add_option("-o,--out", bm.output.out_dir,
                   "Folder for report.json, report.md and the plots");
  c_bm->add_flag("--json", bm.output.json_stdout,
                 "Print report.json on stdout (the tables go to stderr)");
  c_bm->add_flag("--quick", bm.quick, "8 layers, short prompt: a run of well under a minute");
  return {c_bm, [opt] { return cmd_bench_model(*opt); }, [opt] { return plan_json(*opt); }};
}

}  // namespace tangram::cli
