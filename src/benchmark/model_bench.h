// `tangram bench-model`: prefill and decode speed of the forward pass on a realistic generated
// model (or a given file), in several weight types, against the machine's measured memory
// bandwidth and beside llama.cpp on the same file; with --context, KV-bound batched decode under
// every policy (kv_bound.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "benchmark/report.h"
#include "common/result.h"

namespace tangram::bench {

struct BenchModelOptions {
  std::string model;  // benchmark this file; empty: generate from preset/types
  std::string preset = "qwen3-4b-attn";
  std::vector<std::string> types{"f32", "q8_0", "q4_k"};
  int prompt_tokens = 256;
  int gen_tokens = 32;
  int threads = 0;
  std::optional<int> reps;       // --reps; unset: reps_of()
  std::string cache_dir;         // where generated models are kept between runs
  bool llama_cpp = true;         // run llama.cpp (tools/oracle) on the same file alongside
  std::vector<int> concurrency;  // also decode this many sequences at once through the engine
                                 // (continuous batching)
  // > 0: the --concurrency runs are KV-bound decode instead: every sequence's cache filled to this
  // many positions with synthetic KV written straight into its pages, under every --policies
  // (kv_bound.h).
  int64_t context = 0;
  std::vector<std::string> policies{"full", "uniform", "dynamic", "tangram"};
  double kv_ratio = 0.25;  // retention of the compressing policies in --context runs
  std::string profile;     // per-head profile for dynamic/tangram (default: the real Qwen3-4B one)
  std::vector<std::string> kv_types{"f16"};  // page types of the --context runs (f16, f32, q8_0)
  int page_tokens = 16;       // P of the --context runs' pages (the engine's default)
  std::optional<int> rounds;  // --rounds (--context runs timed this many times); unset: rounds_of()
  bool mmap = false;          // weights through the file's memory map, not copied (--mmap)
  ReportOutput output;        // -o DIR (nothing written by default), --json
  bool quick = false;         // fewer layers and tokens: a run of well under a minute
};
// Repetitions of the forward-pass figures and rounds of the --context runs: as given, else 2 and
// 3 (1 and 1 with --quick: it lowers only what was not asked for).
int reps_of(const BenchModelOptions& opt);
int rounds_of(const BenchModelOptions& opt);
// Refuses --policies, --kv-ratio, --profile, --kv-type, --page-tokens and --rounds without
// --context, unknown policies and KV types, and ratios outside (0, 1].
Status check_bench_model_flags(const BenchModelOptions& opt);
// The forward pass: prefill and decode tok/s against the memory-bandwidth ceiling and llama.cpp,
// and (--concurrency) decode throughput against the number of sequences batched together; the
// report goes to opt.output.
Status run_model_bench(BenchModelOptions opt);

}  // namespace tangram::bench
