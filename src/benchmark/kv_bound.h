// `tangram bench-model --context N --concurrency LIST`: decode where the KV cache, not the
// weights, is most of what a step reads. Every sequence's cache is filled to N positions with
// synthetic rows written straight into its pages (evaluation/synthetic_kv.h: each policy's
// per-head lengths and page layout, no prefill), then decode steps of all sequences together run
// through the model (Model::forward_step, the engine's step), attention planned as the engine
// plans it for that policy (tangram: ahead of time; the others: at run time). Per policy and
// concurrency: tok/s, ms per step, the time attention takes in the step and its share, the KV
// bytes the step's attention reads (every stored row of every head once) and that over the
// attention time against the machine's measured read bandwidth, and each policy's bytes per
// cached token over full's (its effective retention). With several --kv-type values every policy
// runs on each page type, and "vs full" and "kept" are over full on the first type listed (e.g.
// f16,q8_0: quantized pages against full F16 in one run). With several rounds every run is timed
// once per round, round-robin, and the report gives its median round and the spread of its
// per-round ratio to full.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/thread_pool.h"
#include "kv/kv_cache.h"
#include "model/model.h"

namespace tangram::bench {

struct KvBoundOptions {
  std::vector<int> concurrency;
  int64_t context = 0;                        // N: positions each sequence holds before decoding
  int steps = 0;                              // decode steps timed per run
  std::vector<std::string> policies;          // full | uniform | dynamic | tangram
  std::vector<KvType> kv_types{KvType::F16};  // page types, each run under every policy
  int page_tokens = 16;                       // P: token slots per page (the engine's default)
  // Every run (page type x policy x concurrency) is filled and timed this many times, round-robin:
  // a slow spell of a shared machine then falls on every run alike, and each run's ratio to full
  // is taken within one round, from runs minutes apart at most.
  int rounds = 1;
  std::function<void()>
      on_run_timed;      // called after each run of each round (a progress bar), may be empty
  double ratio = 0.25;   // retention of the compressing policies
  std::string profile;   // per-head profile fitted to the model (dynamic, tangram)
  double peak_gbps = 0;  // the machine's measured read bandwidth
};

// A ratio taken once per round: its median (the lower middle of an even count), least and most;
// all 0 when there was nothing to compare with.
struct RatioSpread {
  double median = 0, least = 0, most = 0;
};

struct KvBoundRun {
  std::string policy;
  std::string kv_type;  // the pages' element type
  int concurrency = 0;
  double compressor_ratio = 0;   // the ratio the Compressor was given (tangram: fitted)
  int64_t pages_per_seq = 0;     // pages one sequence holds after the fill
  double bytes_per_token = 0;    // pages held x page bytes / context, per sequence
  double retention_vs_full = 0;  // bytes_per_token / full's on the first type listed
  // The figures below are the run's median round (by tok/s; the lower middle for an even count).
  double decode_tok_s = 0;
  std::vector<double> round_tok_s;        // every round's tok/s, in round order
  std::vector<double> round_step_cpu_ms;  // and its step CPU ms
  // Over full (first page type, same concurrency) in the same round: tok/s over full's, and
  // full's step CPU time over this run's (what the run gains in CPU time, which other jobs on
  // a shared machine inflate less).
  RatioSpread vs_full, vs_full_cpu;
  double step_ms = 0;
  double attention_ms = 0;        // per step, all layers
  double attention_share = 0;     // attention_ms / step_ms
  double kv_read_bytes = 0;       // per step: every stored K and V row of every head
  double attention_gbps = 0;      // kv_read_bytes / attention time
  double bandwidth_fraction = 0;  // attention_gbps / peak_gbps
  // The same in CPU time (every thread of the process; unlike wall time, not inflated when other
  // jobs share the cores): per step, all layers, and kv_read_bytes per CPU second of attention
  // (GB/s per busy core) over the probe's (probe_cpu_gbps_per_core).
  double step_cpu_ms = 0;
  double attention_cpu_ms = 0;
  double attention_cpu_gbps_per_core = 0;
  double per_core_fraction = 0;
  // attention_cpu_gbps_per_core over the scattered probe of its page type (KvBoundDecode).
  double column_probe_fraction = 0;
};

// The scattered read probe (measure_scattered_read_bandwidth) over runs of one head's column of
// a page, the bytes attention reads in one stretch before it jumps to another page: the ceiling
// of paged attention's read rate on the machine, beside the sequential probe's.
struct ColumnProbe {
  std::string kv_type;
  size_t column_bytes = 0;       // P x (key row + value row) of the type
  double cpu_gbps_per_core = 0;  // bytes per CPU second, best repetition
};

struct KvBoundDecode {
  std::string label;
  int64_t context = 0;
  std::string kv_types;  // the page types run, e.g. "f16,q8_0"
  int page_tokens = 0;
  int threads = 0;
  int steps = 0;
  int rounds = 0;
  double peak_gbps = 0;
  double probe_cpu_gbps_per_core =
      0;  // the read probe's bytes per CPU second, taken before the runs
  std::vector<ColumnProbe> column_probes;  // one per page type, taken before the runs
  std::vector<KvBoundRun> runs;            // policy after policy, each at every concurrency
};

// Errors: no concurrency or policies, an unknown policy, a context that with the decode steps
// does not fit the model's context length, a profile that does not fit the model, or host memory
// too small for the pages.
Result<KvBoundDecode> measure_kv_bound_decode(Model& model, ThreadPool& pool,
                                              const std::string& label, const KvBoundOptions& opt);
void print_kv_bound(const KvBoundDecode& d, std::FILE* console);
nlohmann::json kv_bound_json(const KvBoundDecode& d);
std::string kv_bound_markdown(const KvBoundDecode& d);

}  // namespace tangram::bench
