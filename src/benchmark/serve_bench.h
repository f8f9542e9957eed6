// `tangram bench-serve`: the HTTP serving benchmark (serve_bench.cpp) and its options, which the
// soak benchmark (soak.h) shares.
#pragma once

#include <string>
#include <vector>

#include "benchmark/report.h"
#include "common/result.h"
#include "launch/engine_settings.h"

namespace tangram::bench {

struct BenchServeOptions {
  std::string url;  // drive this server; empty: start one in process
  std::string
      api_key;        // sent as "Authorization: Bearer KEY" (and required by the in-process server)
  std::string model;  // a GGUF (its tokenizer re-encodes answers); empty: the generated model
  std::string preset = "qwen3-4b-attn";
  std::string type = "q8_0";
  int layers = 8;  // layers of the generated model (its attention shape is the preset's)
  std::string cache_dir;
  std::string workload = "sharegpt";  // a workload preset, "-quick" variants included
  int conversations = 0, turns = 0;   // overrides (0: the preset's)
  uint64_t seed = 1;
  std::vector<double> rates;  // new conversations per second, open loop; empty: the default list
  int max_retries = 8;        // 429 retries per request
  double timeout_s = 600;     // per request
  int max_queue = 64;         // in-process server: requests waiting beyond the running ones
  bool quick = false;
  ReportOutput output{"bench-serve-out", false};  // -o DIR, --json
  EngineSettings engine;
  // --soak: a `tangram serve` child driven for this long (soak.h); "" = the rate benchmark.
  std::string soak;
  std::string soak_restart_every;  // "" = a eighth of --soak; "0" = never
  std::string soak_sample = "5s";  // RSS and /metrics every this often
  std::string soak_rss_growth =
      "64MiB";                     // allowed RSS growth of one server's life after its warm-up
  std::vector<std::string> given;  // the long names of the options on the command line
  std::vector<std::string> engine_args;  // the engine options given, as words for the child server
};
// The HTTP serving benchmark: multi-turn clients against `tangram serve` (or any
// OpenAI-compatible server) at increasing request rates, session reuse on and off; the report
// goes to opt.output. (--soak is run_soak(), soak.h.)
Status run_serve_bench(const BenchServeOptions& opt);
// The flags that do not apply to what was asked (--soak's, the in-process server's with --url).
Status check_bench_serve_flags(const BenchServeOptions& opt);

}  // namespace tangram::bench
