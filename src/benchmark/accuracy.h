// The accuracy part of `tangram bench`: what each (policy, ratio) costs against full KV on text
// the model knows (evaluation/accuracy_workload.h), the profile tangram runs with on a real
// model, and the accuracy section of the report (table, JSON, the accuracy-vs-retention plot).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "benchmark/multiturn.h"
#include "common/thread_pool.h"
#include "engine/engine.h"
#include "evaluation/accuracy_workload.h"
#include "launch/model_loading.h"

namespace tangram::bench {

// The accuracy text (--accuracy-text, else the built-in stories) encoded and cut to the model's
// usable context (the smaller of its context and -c) and --accuracy-tokens; records what was
// chosen in `info`.
Result<AccuracyWorkload> accuracy_workload_for(const BenchOptions& opt, const Tokenizer& tok,
                                               int64_t context, AccuracyInfo& info);

// With -m and no --profile, tangram's profile is made from the model's own text: a few samples
// generated from BOS (seeded, temperature 1), written to <dir>/own_text.txt and profiled by
// `tangram profile` (--kv-ratio 0.3, the scorer, sink and window of the run) into
// <dir>/own_text_profile.json (profiler.h, on the loaded model), whose path is returned.
Result<std::string> profile_from_own_text(const BenchOptions& opt, const LoadedModel& loaded,
                                          const EngineSettings& base, const std::string& dir,
                                          ThreadPool& pool);

// Greedy agreement (policy_agreement) and the teacher-forced perplexity read in turns with KL
// against full KV (evaluate_perplexity) of one run's policy; what fails is noted on stderr and
// left unmeasured.
void measure_accuracy(Model& model, const Tokenizer& tok, const AccuracyWorkload& w,
                      const EngineOptions& eo, ThreadPool& pool, RunRow& row);

// A run's name in a plot's legend: its policy, and its group size where the policy ran at several.
std::string policy_label(const RunRow& row, const MultiturnResults& r);

// The run's configuration in a plot caption's lines: model, workload, KV memory, threads.
std::string run_caption(const MultiturnResults& r);

// The accuracy section of the report: the markdown table, its JSON (per row, under "accuracy"),
// and the accuracy-vs-retention plot (mean KL against effective retention for every policy).
std::string accuracy_markdown(const MultiturnResults& r);
nlohmann::json accuracy_json(const RunRow& row, const RunRow* full);
LinePlot accuracy_retention_plot(const MultiturnResults& r);

}  // namespace tangram::bench
