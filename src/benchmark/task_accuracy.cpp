#include "benchmark/task_accuracy.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "benchmark/accuracy.h"
#include "launch/chat_prompt.h"
#include "launch/data_dir.h"
#include "launch/engine_settings.h"
#include "launch/profile_settings.h"

namespace tangram::bench {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kQuickConversations = 24;  // the set's first 24: 4 of each kind at ~920 tokens

// The engine settings of one plan on the task model (see task_accuracy.h).
EngineSettings task_settings(const BenchOptions& opt, const RunPlan& plan, const TaskSetup& t) {
  EngineSettings s;
  s.threads = opt.engine.threads;
  s.mmap = opt.engine.mmap;
  s.kv_type = opt.engine.kv_type;
  s.page_tokens = opt.engine.page_tokens;
  s.kv_memory = "256MiB";  // a few conversations of a small model, one at a time
  s.kv_scorer = opt.scorer;
  s.kv_policy = plan.policy;
  s.kv_ratio = plan.ratio;
  s.page_group_size = plan.policy == "tangram" ? plan.group_size : 0;
  s.kv_profile = plan.policy == "tangram" ? t.profile_path : "";
  s.kv_chunk = kTaskChunk;
  s.kv_budget_context = t.info.budget_context;
  return s;
}

// The median length in tokens of the whole conversations, rendered by the chat template.
Result<int64_t> median_length(const TaskSetup& t) {
  const Tokenizer& tok = *t.loaded.tokenizer;
  const std::string bos = tok.bos() >= 0 ? tok.token_text(tok.bos()) : "";
  std::vector<int64_t> lengths;
  for (const RecallConversation& c : t.set) {
    std::vector<ChatMessage> messages;
    for (const RecallMessage& m : c.messages) messages.push_back(chat_message(m.role, m.content));
    TG_ASSIGN(std::string text, t.tmpl->render(messages, false, bos, ""));
    lengths.push_back(static_cast<int64_t>(tok.encode(text, false, true).size()));
  }
  std::sort(lengths.begin(), lengths.end());
  return lengths[lengths.size() / 2];
}

Status make_task_profile(const BenchOptions& opt, const std::string& dir, TaskSetup& t) {
  if (!opt.task_profile.empty()) {
    t.profile_path = opt.task_profile;
    t.info.profile_source = opt.task_profile;
    return Status::Ok();
  }
  EngineSettings s = task_settings(opt, {"tangram", 0.25, 4}, t);
  s.profile_cache = (fs::path(dir) / "task-profiles").string();
  TG_ASSIGN(ResolvedProfile p,
            automatic_profile(s, *t.loaded.model, *t.loaded.tokenizer, t.loaded.path));
  if (p.temporary) return make_error("no folder to keep the task model's profile in: give -o");
  t.profile_path = p.path;
  t.info.profile_source =
      fmt::format("`tangram profile` on the calibration text (data/calibration): {}", p.path);
  return Status::Ok();
}

double task_accuracy_of(const RunRow& row) { return row.task ? row.task->all.accuracy() : 0.0; }

std::string task_caption(const MultiturnResults& r) {
  const TaskInfo& t = *r.task;
  return fmt::format(
      "task model {} ({} layers, {} KV heads x {}); {} held-out conversations, {} questions\n"
      "compressed every {} tokens; throughput on {} ({} layers, {} KV heads x {})",
      fs::path(t.model_path).filename().string(), t.config.n_layers, t.config.n_kv_head,
      t.config.head_dim, t.conversations, t.questions, t.chunk,
      fs::path(r.model_path).filename().string(), r.config.n_layers, r.config.n_kv_head,
      r.config.head_dim);
}

}  // namespace

Result<std::optional<TaskSetup>> set_up_task(const BenchOptions& opt, const std::string& dir) {
  if (opt.task_model.empty() || opt.task_conversations == 0) return std::optional<TaskSetup>();
  TaskSetup t;
  t.info.set_path = opt.task_set.empty() ? default_recall_set().string() : opt.task_set;
  TG_ASSIGN(t.set, load_recall_set(t.info.set_path));
  const int n =
      opt.task_conversations > 0 ? opt.task_conversations : (opt.quick ? kQuickConversations : 0);
  if (n > 0 && static_cast<size_t>(n) < t.set.size()) t.set.resize(static_cast<size_t>(n));
  TG_ASSIGN(t.loaded, load_model_for_serving(opt.task_model, "", "", 0, "", opt.engine.threads,
                                             model_options_for(opt.engine)));
  TG_ASSIGN(ChatTemplate tmpl, pick_chat_template("", *t.loaded.tokenizer));
  t.tmpl = std::move(tmpl);
  t.info.model_path = t.loaded.path;
  t.info.config = t.loaded.model->config();
  t.info.conversations = static_cast<int64_t>(t.set.size());
  for (const RecallConversation& c : t.set) t.info.questions += c.questions();
  t.info.chunk = kTaskChunk;
  TG_ASSIGN(t.info.budget_context, median_length(t));
  if (std::find(opt.policies.begin(), opt.policies.end(), "tangram") != opt.policies.end())
    TG_TRY(make_task_profile(opt, dir, t));
  return std::optional<TaskSetup>(std::move(t));
}

void measure_task(const TaskSetup& t, const BenchOptions& opt, const RunPlan& plan, RunRow& row) {
  auto eo = to_engine_options(task_settings(opt, plan, t));
  if (!eo) {
    fmt::print(stderr, "note: task accuracy of {} at {} not measured: {}\n", row.policy, row.ratio,
               eo.message());
    return;
  }
  auto score = run_recall(*t.loaded.model, *t.loaded.tokenizer, *t.tmpl, *eo, t.set);
  if (score)
    row.task = std::move(score).value();
  else
    fmt::print(stderr, "note: task accuracy of {} at {} not measured: {}\n", row.policy, row.ratio,
               score.message());
}

std::string task_markdown(const MultiturnResults& r) {
  if (!r.task) return "";
  const TaskInfo& t = *r.task;
  std::set<std::string> kinds;
  for (const RunRow& row : r.rows)
    if (row.task)
      for (const auto& [kind, tally] : row.task->by_kind) kinds.insert(kind);
  std::string head = "| policy | ratio | G | retention | task accuracy |";
  std::string rule = "| --- | ---: | ---: | ---: | ---: |";
  for (const std::string& k : kinds) head += " " + k + " |", rule += " ---: |";
  head += " output tok/s |\n";
  rule += " ---: |\n";
  std::string md = fmt::format(
      "\n## Task accuracy\n\nExact recall of facts given earlier in {} held-out multi-turn "
      "conversations ({} questions; `{}`) on the task model `{}` ({} layers, {} KV heads x {}), "
      "each question played as a chat client plays it, the KV compressed every {} tokens and at "
      "every prompt's end; tangram's budgets commit the ratio at {} tokens (the set's median "
      "conversation). Retention: KV entries kept at the questions over full KV's. Output tok/s: "
      "the same policy and ratio on the throughput model above. Tangram's profile of the task "
      "model: {}.\n\n",
      t.conversations, t.questions, t.set_path, t.model_path, t.config.n_layers, t.config.n_kv_head,
      t.config.head_dim, t.chunk, t.budget_context,
      t.profile_source.empty() ? "none (tangram not run)" : t.profile_source);
  md += head + rule;
  for (const RunRow& row : r.rows) {
    if (!row.task) continue;
    const RecallScore& s = *row.task;
    md += fmt::format("| {} | {:.2f} | {} | {:.3f} | {:.3f} |", row.policy, row.ratio,
                      row.group_size, s.mean_retention, s.all.accuracy());
    for (const std::string& k : kinds) {
      const auto it = s.by_kind.find(k);
      md += it == s.by_kind.end() ? " - |" : fmt::format(" {:.2f} |", it->second.accuracy());
    }
    md += fmt::format(" {:.1f} |\n", row.metrics.output_tokens_per_s);
  }
  return md;
}

json task_json(const RecallScore& s) {
  json kinds = json::object();
  for (const auto& [kind, t] : s.by_kind)
    kinds[kind] = {{"questions", t.questions}, {"correct", t.correct}, {"accuracy", t.accuracy()}};
  json misses = json::array();
  for (const RecallScore::Miss& m : s.misses)
    misses.push_back({{"kind", m.kind}, {"expected", m.expected}, {"answer", m.answer}});
  return {{"questions", s.all.questions},     {"correct", s.all.correct},
          {"accuracy", s.all.accuracy()},     {"by_kind", kinds},
          {"retention", s.mean_retention},    {"mean_prompt_tokens", s.mean_prompt_tokens},
          {"conversations", s.conversations}, {"misses", misses}};
}

LinePlot task_retention_plot(const MultiturnResults& r) {
  std::vector<NamedPoint> points;
  for (const RunRow& row : r.rows)
    if (row.task)
      points.push_back({policy_label(row, r), row.task->mean_retention, task_accuracy_of(row)});
  LinePlot p;
  p.title = "Task accuracy vs effective retention (upper left is better)";
  p.x_label = "effective retention (KV entries kept at the questions / full KV's)";
  p.y_label = "task accuracy (exact recall)";
  p.x_from_zero = true;
  p.series = series_by_name(points);
  p.caption = task_caption(r);
  return p;
}

LinePlot task_throughput_plot(const MultiturnResults& r) {
  // With --rates, what each run sustains within the TTFT limit; else its tok/s at the workload's
  // own rate.
  const bool goodput = std::any_of(r.rows.begin(), r.rows.end(),
                                   [](const RunRow& row) { return row.goodput.has_value(); });
  std::vector<NamedPoint> points;
  for (const RunRow& row : r.rows)
    if (row.task)
      points.push_back({policy_label(row, r),
                        goodput ? (row.goodput ? row.goodput->output_tokens_per_s : 0.0)
                                : row.metrics.output_tokens_per_s,
                        task_accuracy_of(row)});
  LinePlot p;
  p.title = "Task accuracy vs throughput (upper right is better)";
  p.x_label = goodput ? fmt::format(
                            "sustained output tokens/s on the throughput model (at its goodput: "
                            "TTFT p90 within {:g} s)",
                            r.sweep ? r.sweep->ttft_limit_s : 0.0)
                      : "output tokens/s on the throughput model, same KV memory";
  p.y_label = "task accuracy (exact recall)";
  p.series = series_by_name(points);
  p.caption = task_caption(r);
  return p;
}

}  // namespace tangram::bench
