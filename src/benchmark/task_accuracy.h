// The task-accuracy part of `tangram bench`: at every (policy, ratio) of the sweep, held-out
// multi-turn recall conversations (evaluation/recall_eval.h) are played on a real chat model (the
// task model, --task-model), so that the report can set what a policy keeps of the answers
// beside what it serves on the throughput model. Throughput and task accuracy are measured on
// different models on purpose: the throughput model has the attention shape of the models people
// run, the task model is a real model that can recall, small enough to train on this machine.
//
// The task runs share the sweep's policy, ratio, group size, scorer and KV type; the rest is the
// task model's own: compression every kTaskChunk tokens (about a turn, as a chat is compressed
// at each turn's end), tangram's budgets committing the ratio at the set's median conversation
// length, and tangram's profile of the task model (--task-profile, else made once from the
// calibration text into the report folder).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "benchmark/multiturn.h"
#include "chat/chat_template.h"
#include "common/svg_plot.h"
#include "evaluation/recall_set.h"
#include "launch/model_loading.h"

namespace tangram::bench {

inline constexpr int64_t kTaskChunk = 128;

struct TaskSetup {
  LoadedModel loaded;
  std::optional<ChatTemplate> tmpl;
  std::vector<RecallConversation> set;
  TaskInfo info;
  std::string profile_path;  // tangram's profile of the task model ("" when tangram is not run)
};

// The task model, its set and tangram's profile of it, or nullopt when no --task-model is given
// or --task-conversations is 0. `dir` is the report folder (the profile cache goes there).
Result<std::optional<TaskSetup>> set_up_task(const BenchOptions& opt, const std::string& dir);

// The plan's policy on the task model; a failure is noted on stderr and leaves row.task empty.
void measure_task(const TaskSetup& task, const BenchOptions& opt, const RunPlan& plan, RunRow& row);

// The report's task-accuracy section (per kind, with each run's retention on the task model and
// its throughput on the throughput model), its JSON per row, and the two frontier plots: task
// accuracy against effective retention, and against sustained output tokens/s.
std::string task_markdown(const MultiturnResults& r);
nlohmann::json task_json(const RecallScore& score);
LinePlot task_retention_plot(const MultiturnResults& r);
LinePlot task_throughput_plot(const MultiturnResults& r);

}  // namespace tangram::bench
