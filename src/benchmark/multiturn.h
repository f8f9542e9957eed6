// `tangram bench` inside: what its runs measure (multiturn_bench.cpp runs and measures) and how the
// report is made from them (multiturn_report.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "benchmark/multiturn_bench.h"
#include "benchmark/rate_sweep.h"
#include "benchmark/report.h"
#include "benchmark/restore_probe.h"
#include "compress/compressor.h"
#include "compress/profile.h"
#include "evaluation/accuracy.h"
#include "evaluation/metrics.h"
#include "evaluation/perplexity.h"
#include "evaluation/planted_eval.h"
#include "evaluation/recall_eval.h"
#include "evaluation/runner.h"
#include "evaluation/workload.h"
#include "model/model.h"

namespace tangram::bench {

// One (policy, ratio, group size) of the sweep.
struct RunPlan {
  std::string policy;
  double ratio = 1.0;
  int group_size = 0;  // tangram only; 0 otherwise
};

// Every (policy, ratio, group size) of the lists, full once at ratio 1, and dynamic also at each
// ratio times --dynamic-bracket when another compressing policy runs beside it.
std::vector<RunPlan> plan_runs(const BenchOptions& opt);

struct RunRow {
  std::string policy;
  double ratio = 1.0;
  int group_size = 0;
  WorkloadRun run;
  RunMetrics metrics;
  std::optional<AgreementResult> accuracy;  // greedy agreement and KL against full KV
  std::optional<PerplexityResult>
      perplexity;                          // the accuracy text read in turns, KL against full KV
  std::optional<PlantedFactsScore> facts;  // planted-facts exact match (real chat models)
  std::optional<RecallScore> task;         // task accuracy on the task model (task_accuracy.h)
  std::optional<Goodput> goodput;          // with --rates: what the run sustains (rate_sweep.h)
  // What the policy commits in closed form at `retention_context` (Compressor::retention_at;
  // none for dynamic): kept entries with group maxima, each head at its own budget, full KV's.
  std::optional<Compressor::Retention> committed;
  int64_t retention_context = 0;
};

// The accuracy workload the rows were measured on (accuracy.h).
struct AccuracyInfo {
  std::string text_source;      // the file, or the built-in text
  int64_t text_tokens = 0;      // the whole text
  int64_t window = 0;           // tokens read teacher-forced
  int64_t chunk = 0;            // tokens per turn of that read
  int64_t context_tokens = 0;   // greedy agreement: context prefilled before generating
  int n_generate = 0;           // greedy agreement: tokens generated
  std::string profile_source;   // tangram's profile: the file given, or how it was made
  bool random_weights = false;  // the generated model: a numerical check, not accuracy
};

// The task-accuracy workload the rows were measured on (task_accuracy.h).
struct TaskInfo {
  std::string model_path;
  ModelConfig config;
  std::string set_path;
  int64_t conversations = 0, questions = 0;
  int64_t chunk = 0;           // tokens between compression points
  int64_t budget_context = 0;  // the context tangram's budgets commit the ratio at
  std::string profile_source;  // tangram's profile of the task model
};

// Everything a `tangram bench` run measured: the input of its report.
struct MultiturnResults {
  std::string model_path;
  ModelConfig config;
  WorkloadSpec spec;
  int64_t kv_memory_bytes = 0;
  int threads = 0;
  int facts_per_conversation = 0;
  double dense_kv_bytes_per_token = 0;  // full KV's bytes per token, no page rounding
  std::vector<RunRow> rows;
  std::optional<RetentionProfile> profile;  // cut to the model's layers (tangram runs only)
  AccuracyInfo accuracy;
  std::optional<TaskInfo> task;  // when task accuracy was measured
  std::optional<HostRestoreTiming>
      restore;  // from the host tier, under the reference tangram run's policy
  std::vector<HostRestoreTiming>
      restore_contexts;            // --restore-contexts: host and disk at each length
  std::string restore_policy;      // the KV policy the restores ran under
  nlohmann::json oversubscribed;   // --oversubscription (null when not run)
  std::optional<RateSweep> sweep;  // --rates
};

// The run every comparison is against: full KV (nullptr when not run).
const RunRow* full_run(const std::vector<RunRow>& rows);
// The tangram run the headline figures, the restore and the rate sweep use: the ratio nearest 0.25.
const RunRow* reference_tangram_run(const std::vector<RunRow>& rows);
// The fraction of full KV a run kept: its KV bytes per cached token over the full run's (the
// dense figure when full did not run).
double effective_ratio(const MultiturnResults& r, const RunRow& row);
// Tokens kept beyond the heads' own budgets because of their groups, over the tokens kept, at
// the run's retention context (0 where no group raises a head: full, uniform, dynamic).
double over_retention(const RunRow& row);

// Console tables go to `console` as each part is known; the report gathers every figure.
void print_runs_table(const MultiturnResults& r, std::FILE* console);
void print_restore(const MultiturnResults& r, std::FILE* console);
void print_rate_sweep(const RateSweep& sweep, std::FILE* console);
// The service figures and the equal-memory comparison (service_report.cpp): where each
// run's follow-up turns found their history, the engine's busy share, and x full / x dynamic at
// the same ratio and at equal effective retention.
void print_service_table(const MultiturnResults& r, std::FILE* console);
std::string service_markdown(const MultiturnResults& r);
nlohmann::json service_json(const MultiturnResults& r);
// tangram's x dynamic at equal effective retention, as a clause ("" when it cannot be paired).
std::string equal_retention_verdict(const MultiturnResults& r, const RunRow& tangram);
// The targets, stated plainly: tangram's throughput against full's and dynamic's, and the rate
// sweep's.
std::string multiturn_verdict(const MultiturnResults& r);
BenchReport multiturn_report(const MultiturnResults& r, const std::vector<std::string>& policies);

}  // namespace tangram::bench
