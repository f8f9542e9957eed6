// `tangram recall`: task accuracy of a KV policy on a real chat model. Held-out multi-turn
// conversations (data/eval/recall-heldout.jsonl) are played through the serving engine as a
// client plays them, the KV compressed by the policy as serving compresses it, and every
// question's greedy answer is scored by exact match (evaluation/recall_eval.h). Prints the
// accuracy per task kind and in all, and the KV retention the policy reached.
#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/cli_error.h"
#include "cli/command.h"
#include "cli/commands.h"
#include "cli/config_json.h"
#include "cli/engine_flags.h"
#include "common/progress.h"
#include "evaluation/recall_eval.h"
#include "launch/chat_prompt.h"
#include "launch/data_dir.h"
#include "launch/model_loading.h"
#include "launch/profile_settings.h"

namespace tangram::cli {
namespace {

void print_text(const RecallScore& s, const CompressionOptions& policy) {
  fmt::print("{:<10} {:>9} {:>8} {:>9}\n", "kind", "questions", "correct", "accuracy");
  for (const auto& [kind, t] : s.by_kind)
    fmt::print("{:<10} {:>9} {:>8} {:>9.3f}\n", kind, t.questions, t.correct, t.accuracy());
  fmt::print("{:<10} {:>9} {:>8} {:>9.3f}\n", "all", s.all.questions, s.all.correct,
             s.all.accuracy());
  fmt::print(
      "policy {}{} | {} conversations, {:.0f} prompt tokens per question on average | retention "
      "{:.3f} of full KV's entries at the questions\n",
      kv_policy_name(policy.policy),
      policy.compresses() ? fmt::format(" at ratio {}", policy.ratio) : "", s.conversations,
      s.mean_prompt_tokens, s.mean_retention);
  for (const RecallScore::Miss& m : s.misses)
    fmt::print("miss ({}): expected '{}', answered '{}'\n", m.kind, m.expected, m.answer);
}

nlohmann::json score_json(const RecallScore& s, const RecallCmdOptions& opt, const std::string& set,
                          const CompressionOptions& policy) {
  nlohmann::json kinds = nlohmann::json::object();
  for (const auto& [kind, t] : s.by_kind)
    kinds[kind] = {{"questions", t.questions}, {"correct", t.correct}, {"accuracy", t.accuracy()}};
  nlohmann::json misses = nlohmann::json::array();
  for (const RecallScore::Miss& m : s.misses)
    misses.push_back({{"kind", m.kind}, {"expected", m.expected}, {"answer", m.answer}});
  return {{"model", opt.model},
          {"set", set},
          {"policy", kv_policy_name(policy.policy)},
          {"ratio", policy.ratio},
          {"conversations", s.conversations},
          {"questions", s.all.questions},
          {"correct", s.all.correct},
          {"accuracy", s.all.accuracy()},
          {"by_kind", kinds},
          {"mean_prompt_tokens", s.mean_prompt_tokens},
          {"retention", s.mean_retention},
          {"misses", misses}};
}

Status run_recall_command(const RecallCmdOptions& opt) {
  TG_ASSIGN(EngineOptions eo, to_engine_options(opt.engine));
  const std::string set_path = opt.set.empty() ? default_recall_set().string() : opt.set;
  TG_ASSIGN(std::vector<RecallConversation> set, load_recall_set(set_path));
  if (opt.conversations > 0 && static_cast<size_t>(opt.conversations) < set.size())
    set.resize(static_cast<size_t>(opt.conversations));
  TG_ASSIGN(LoadedModel loaded, load_model_for_serving(opt.model, "", "", 0, "", opt.engine.threads,
                                                       model_options_for(opt.engine)));
  auto profile = resolve_kv_profile(eo, opt.engine, *loaded.model, *loaded.tokenizer, opt.model);
  if (!profile) return Error{profile.message()};
  TG_ASSIGN(ChatTemplate tmpl, pick_chat_template(opt.chat_template, *loaded.tokenizer));
  RecallOptions ro;
  ro.max_answer_tokens = opt.max_answer_tokens;
  ProgressBar bar("recall", static_cast<int64_t>(set.size()));
  ro.on_progress = [&bar](int64_t, int64_t) { bar.add(); };
  TG_ASSIGN(RecallScore score, run_recall(*loaded.model, *loaded.tokenizer, tmpl, eo, set, ro));
  bar.finish();
  const CompressionOptions& policy = eo.scheduler.compression;
  if (opt.json)
    fmt::print("{}\n", score_json(score, opt, set_path, policy).dump(2));
  else
    print_text(score, policy);
  return Status::Ok();
}

}  // namespace

int cmd_recall(const RecallCmdOptions& opt) {
  if (Status st = run_recall_command(opt); !st) return fail(st.message());
  return 0;
}

Command register_recall(CLI::App& app) {
  auto opt = std::make_shared<RecallCmdOptions>();
  RecallCmdOptions& r = *opt;
  auto* c = app.add_subcommand(
      "recall",
      "Task accuracy of a KV policy: exact recall of facts given earlier in held-out multi-turn "
      "conversations, played through the serving engine and compressed as serving compresses "
      "them; per task kind, with the KV retention reached");
  c->add_option("-m,--model", r.model, "GGUF chat model")->required()->check(CLI::ExistingFile);
  c->add_option("--set", r.set,
                "Recall conversations, one JSON object per line (data/eval/README.md); default: "
                "the shipped held-out set")
      ->check(CLI::ExistingFile);
  c->add_option("--chat-template", r.chat_template,
                "Chat template: a builtin name (chatml, llama3, llama2) or a Jinja file "
                "(default: the model's)");
  c->add_option("--conversations", r.conversations, "Only the first N conversations (0: all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_option("--max-answer-tokens", r.max_answer_tokens, "Most tokens of one answer")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  c->add_flag("--json", r.json, "Print the result as JSON on stdout");
  add_engine_options(c, r.engine);
  return {c, [opt] { return cmd_recall(*opt); }, [opt] { return plan_json(*opt); }};
}

}  // namespace tangram::cli
