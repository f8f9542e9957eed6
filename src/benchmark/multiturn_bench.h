// Options of `tangram bench`, the multi-turn serving benchmark. Its sweeps are list-valued, as
// llama-bench's are: every (policy, ratio, group size) in the lists is one run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "benchmark/report.h"
#include "common/result.h"
#include "launch/engine_settings.h"

namespace tangram::bench {

inline constexpr double kDefaultTtftLimit = 2.0;  // seconds of TTFT p90 (--ttft-limit)

struct BenchOptions {
  std::string model;  // a GGUF; empty: the generated model of preset/type/layers
  std::string preset = "qwen3-4b-attn";
  std::string type = "q8_0";
  int layers = 8;  // layers of the generated model (its attention shape is the preset's)
  std::string cache_dir;
  std::string workload = "service";                   // service | scbench | locomo | sharegpt
  std::string trace;                                  // replay a JSONL trace instead
  int conversations = 0, turns = 0, concurrency = 0;  // overrides (0: the preset's)
  int64_t first_turn_tokens = 0, followup_tokens = 0, gen_tokens = 0;
  double rate = 0;         // > 0: open loop, new sessions per second (Poisson)
  double think_time = -1;  // >= 0: mean think time before each follow-up (-1: the preset's)
  // Also run every policy and ratio open loop at each of these rates: TTFT against load, and each
  // run's goodput, the highest rate it sustains with TTFT p90 within ttft_limit seconds.
  std::vector<double> rates;
  std::optional<double> ttft_limit;  // seconds; unset: kDefaultTtftLimit
  uint64_t seed = 1;
  std::vector<std::string> policies{"full", "uniform", "dynamic", "tangram"};
  std::vector<double> ratios{0.25};
  // Dynamic, the baseline of "x dynamic", also runs at each ratio times this (0: not), so that its
  // runs bracket the other policies' effective retention: it keeps more than the ratio asks, and
  // "x dynamic at equal retention" interpolates only between two of its runs (equal_retention.h).
  double dynamic_bracket = 0.6;
  std::vector<int> group_sizes{4};
  std::string scorer = "keydiff";
  std::string
      profile;  // default: data/profiles/<profile_dir>/<profile_model>/profile_perlayer.json
  std::string profile_dir = "keydiff";
  std::string profile_model = "qwen3-4b-instruct-2507";
  double memory_sessions = 3;  // --kv-memory auto: room for this many conversations under full KV
  bool accuracy = true;        // greedy agreement, KL and perplexity against full KV (real weights)
  // With the generated model (random weights), also run that comparison, as a numerical check
  // of the policies' paths: its figures are not accuracy.
  bool numerical_check = false;
  std::string accuracy_text;      // text for the accuracy runs; empty: the built-in stories
  int64_t accuracy_tokens = 512;  // most tokens of it read (and at most the model's context)
  int facts = -1;  // planted facts per conversation; -1: 4 with -m (a real model), else 0
  // Task accuracy (task_accuracy.h): held-out recall conversations played on this real chat model
  // under every (policy, ratio) of the sweep; "" = not measured.
  std::string task_model;
  std::string task_set;         // the conversations; "" = the shipped held-out set
  int task_conversations = -1;  // the first N of them; -1: all (24 with --quick); 0: none
  std::string task_profile;     // tangram's profile of the task model; "" = made from calibration
  // Time to restore an idle conversation of each of these lengths from host memory and from disk
  // against re-prefilling it; empty: one restore from host memory at the first message's length.
  std::vector<int64_t> restore_contexts;
  std::string disk_dir;  // where the disk tier is measured (default: a temp folder)
  // > 0: also the oversubscribed workload, the KV pool holding 1/X of the conversations, with no
  // tier, the host tier and the disk tier (oversubscribed.h).
  double oversubscription = 0;
  bool quick = false;
  ReportOutput output{"tangram-bench", false};
  EngineSettings engine;
};

// Refuses flags that would not act: --numerical-check with -m (the comparison runs anyway) or
// with --no-accuracy, and the --task-* flags without --task-model.
Status check_bench_flags(const BenchOptions& opt);

// The multi-turn serving benchmark: every KV policy on the same model, workload and KV memory
// (multiturn_bench.cpp); the report goes to opt.output.
Status run_multiturn_bench(const BenchOptions& opt);

}  // namespace tangram::bench
