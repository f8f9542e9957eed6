// `tangram bench-serve`'s flags; the benchmarks themselves are bench::run_serve_bench
// (src/benchmark/serve_bench.cpp) and, with --soak, bench::run_soak (src/benchmark/soak.cpp).
#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "benchmark/soak.h"
#include "cli/cli_error.h"
#include "cli/command.h"
#include "cli/commands.h"
#include "cli/config_json.h"
#include "cli/engine_flags.h"

namespace tangram::cli {

int cmd_bench_serve(const BenchServeOptions& opt) {
  if (!opt.soak.empty()) {
    Result<bool> passed = bench::run_soak(opt);
    if (!passed) return fail(passed.message());
    return *passed ? 0 : 1;  // the verdict line says why
  }
  if (Status st = bench::run_serve_bench(opt); !st) return fail(st.message());
  return 0;
}

Command register_bench_serve(CLI::App& app) {
  auto opt = std::make_shared<BenchServeOptions>();
  BenchServeOptions& bs = *opt;
  bs.engine.max_running = 16;  // as `tangram serve`
  auto* c_bs = app.add_subcommand("bench-serve",
                                  "HTTP serving benchmark: multi-turn clients at increasing "
                                  "request rates, session reuse on vs off");
  c_bs->add_option(
      "--url", bs.url,
      "Drive this running server (e.g. http://127.0.0.1:8080; start it with the same -m); "
      "default: start one in process on a free port");
  c_bs->add_option("--api-key", bs.api_key, "Send 'Authorization: Bearer KEY'");
  c_bs->add_option(
          "-m,--model", bs.model,
          "GGUF model served in process (with --url: the server's model, for its tokenizer); "
          "default: the generated model of --preset/--type/--layers")
      ->check(CLI::ExistingFile);
  c_bs->add_option("--preset", bs.preset, "Attention shape of the generated model")
      ->capture_default_str();
  c_bs->add_option("--type", bs.type, "Weight type of the generated model")->capture_default_str();
  c_bs->add_option("--layers", bs.layers, "Layers of the generated model (0: the preset's)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c_bs->add_option("--cache-dir", bs.cache_dir, "Where generated models are kept");
  c_bs->add_option(
          "--workload", bs.workload,
          "Preset: sharegpt (short chats), locomo (long histories), scbench (shared context); "
          "a -quick suffix shrinks it")
      ->capture_default_str();
  c_bs->add_option("--conversations", bs.conversations,
                   "Conversations per run (default: the preset's)")
      ->check(CLI::NonNegativeNumber);
  c_bs->add_option("--turns", bs.turns, "Turns per conversation (default: the preset's)")
      ->check(CLI::NonNegativeNumber);
  c_bs->add_option("--seed", bs.seed, "Workload seed")->capture_default_str();
  c_bs->add_option(
          "--rates", bs.rates,
          "New conversations per second (open loop, Poisson), one run per rate and reuse mode "
          "(default 0.5,1,2,4; with --quick 1,4)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  c_bs->add_option("--max-retries", bs.max_retries,
                   "Retries of a request answered 429 (after its Retry-After)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c_bs->add_option("--timeout", bs.timeout_s, "Seconds a request may stall")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 86400.0));
  c_bs->add_option("--max-queue", bs.max_queue,
                   "In-process server: requests that may wait; more get 429")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c_bs->add_flag("--quick", bs.quick, "The -quick workload at 2 rates: well under a minute");
  c_bs->add_option("-o,--out", bs.output.out_dir, "Folder for report.json, report.md and the plots")
      ->capture_default_str();
  c_bs->add_flag("--json", bs.output.json_stdout,
                 "Print report.json on stdout (the tables go to stderr)");
  c_bs->add_option("--soak", bs.soak,
                   "Soak mode: start `tangram serve` as a child process (-m, or the generated "
                   "model; --kv-disk in a "
                   "temporary folder) and drive it this long (e.g. 90s, 10m) with a seeded mix of "
                   "multi-turn chats "
                   "(streamed and not), mid-stream disconnects, session DELETEs (some mid-turn), "
                   "requests that must "
                   "fail, and restarts (SIGTERM, some kill -9); samples RSS and /metrics; exits 1 "
                   "unless the verdict "
                   "is PASS. --conversations = concurrent clients (default 6), --turns = turns per "
                   "conversation (default 4); "
                   "--url, --rates, --workload, --quick and --max-retries do not apply");
  c_bs->add_option(
      "--soak-restart-every", bs.soak_restart_every,
      "With --soak: restart the server this often (every third restart a kill -9); 0 = never "
      "(default: an eighth of --soak; none in its last fifth)");
  c_bs->add_option("--soak-sample", bs.soak_sample,
                   "With --soak: sample the server's RSS and /metrics this often")
      ->capture_default_str();
  c_bs->add_option("--soak-rss-growth", bs.soak_rss_growth,
                   "With --soak: most RSS one server process may gain after its warm-up (the first "
                   "quarter of its "
                   "life) before the verdict is FAIL")
      ->capture_default_str();
  std::vector<CLI::Option*> engine_options = add_engine_options(c_bs, bs.engine);
  // What was given, for the checks of --soak and the child server's arguments (run and plan alike).
  auto record_given = [opt, c_bs, engine_options] {
    for (const CLI::Option* o : c_bs->get_options())
      if (o->count() > 0 && !o->get_lnames().empty())
        opt->given.push_back("--" + o->get_lnames().front());
    opt->engine_args = given_as_args(engine_options);
  };
  auto run = [opt, record_given] {
    record_given();
    return cmd_bench_serve(*opt);
  };
  auto plan = [opt, record_given] {
    record_given();
    return plan_json(*opt);
  };
  return {c_bs, run, plan};
}

}  // namespace tangram::cli
