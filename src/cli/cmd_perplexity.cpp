// `tangram perplexity`: the accuracy cost of a KV policy on real weights, as llama.cpp's
// llama-perplexity reports it (running perplexity, then PPL = x +/- y), plus the mean KL of the
// policy's next-token distributions from full KV's and the KV retention it reached. The run
// itself is evaluate_perplexity() (src/evaluation/perplexity.h); this file reads the text and
// flags, and prints.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_error.h"
#include "cli/command.h"
#include "cli/commands.h"
#include "cli/config_json.h"
#include "common/file_text.h"
#include "common/thread_pool.h"
#include "evaluation/accuracy.h"
#include "evaluation/perplexity.h"
#include "launch/model_loading.h"
#include "launch/profile_settings.h"

namespace tangram::cli {
namespace {

// Engine flags that shape a serving pool shared by many conversations; perplexity runs one
// sequence in a pool sized to its window, so these would silently do nothing: refused.
constexpr const char* kRefusedFlags[] = {"--kv-memory",    "--kv-host-memory",  "--kv-disk",
                                         "--kv-disk-max",  "--kv-redis",        "--kv-redis-prefix",
                                         "--kv-redis-ttl", "--kv-idle-offload", "--max-running"};

Status refuse_inapplicable(const std::vector<std::string>& given) {
  for (const std::string& g : given)
    for (const char* r : kRefusedFlags)
      if (g == r)
        return make_error(
            "{} does not apply to perplexity (one sequence in a KV pool sized to its window)", g);
  return Status::Ok();
}

// The library options from the shared engine flags (already checked by to_engine_options).
PerplexityOptions library_options(const PerplexityCmdOptions& opt, const SchedulerOptions& so,
                                  const Tokenizer& tok, const std::vector<int32_t>& repeat) {
  PerplexityOptions o;
  o.policy = so.compression;
  o.group_size = so.page_group_size;
  o.page_tokens = so.page_tokens;
  o.kv_type = so.kv_type;
  o.reference_kv_type = reference_kv_type_for(so.kv_type);
  o.chunk = opt.chunk;
  o.window = so.max_context;
  o.max_step = std::min(so.prefill_chunk, so.step_tokens);
  o.bos = tok.add_bos() ? tok.bos() : -1;
  o.repeat_instruction = repeat;
  return o;
}

void print_text(const PerplexityResult& r, const PerplexityOptions& o) {
  const CompressionOptions& policy = o.policy;
  fmt::print("tokens {} | {} window(s) of {} tokens{} | {} predictions scored\n", r.n_tokens,
             r.n_windows, r.window,
             r.skipped_tokens > 0
                 ? fmt::format(" ({} trailing tokens not evaluated)", r.skipped_tokens)
                 : "",
             r.scored);
  fmt::print("PPL = {:.4f} +/- {:.4f}\n", r.ppl, r.ppl_stderr);
  if (!r.compared) return;
  fmt::print("KL(full {} || {} {}) mean = {:.6f} nats, max = {:.6f} | top-1 agreement {:.4f}\n",
             kv_type_name(o.reference_kv_type.value_or(o.kv_type)), kv_policy_name(policy.policy),
             kv_type_name(o.kv_type), r.mean_kl, r.max_kl, r.top1_agreement);
  fmt::print(
      "retention = {:.4f} of full KV's bytes per cached token ({:.4f} of its entries) | {} "
      "compressions{}\n",
      r.retention_bytes, r.retention_entries, r.compressions,
      r.compressions_skipped > 0 ? fmt::format(", {} skipped", r.compressions_skipped) : "");
}

void print_json(const PerplexityResult& r, const PerplexityOptions& o,
                const PerplexityCmdOptions& opt) {
  nlohmann::json j;
  j["model"] = opt.model;
  j["text"] = opt.file;
  j["policy"] = kv_policy_name(o.policy.policy);
  j["ratio"] = o.policy.ratio;
  j["scorer"] = o.policy.scorer.name;
  j["chunk"] = o.chunk;
  j["window"] = r.window;
  j["n_windows"] = r.n_windows;
  j["n_tokens"] = r.n_tokens;
  j["skipped_tokens"] = r.skipped_tokens;
  j["scored"] = r.scored;
  j["mean_nll"] = r.mean_nll;
  j["nll_stderr"] = r.nll_stderr;
  j["ppl"] = r.ppl;
  j["ppl_stderr"] = r.ppl_stderr;
  j["kv_type"] = kv_type_name(o.kv_type);
  j["reference_kv_type"] = kv_type_name(o.reference_kv_type.value_or(o.kv_type));
  j["compared_with_full"] = r.compared;
  j["mean_kl"] = r.mean_kl;
  j["top1_agreement"] = r.top1_agreement;
  j["max_kl"] = r.max_kl;
  j["retention_bytes"] = r.retention_bytes;
  j["retention_entries"] = r.retention_entries;
  j["compressions"] = r.compressions;
  j["compressions_skipped"] = r.compressions_skipped;
  fmt::print("{}\n", j.dump(2));
}

}  // namespace

int cmd_perplexity(const PerplexityCmdOptions& opt) {
  if (Status st = refuse_inapplicable(opt.given); !st.ok()) return fail(st.message());
  auto engine_opts = to_engine_options(opt.engine);
  if (!engine_opts) return fail(engine_opts.message());
  auto text = read_file_text(opt.file, "the text file");
  if (!text) return fail(text.message());
  auto loaded = load_model_for_serving(opt.model, "", "", 0, "", opt.engine.threads,
                                       model_options_for(opt.engine));
  if (!loaded) return fail(loaded.message());
  Model& model = *loaded->model;
  const Tokenizer& tok = *loaded->tokenizer;
  auto profile = resolve_kv_profile(*engine_opts, opt.engine, model, tok, opt.model);
  if (!profile) return fail(profile.message());
  const SchedulerOptions& so = engine_opts->scheduler;
  const std::vector<int32_t> tokens =
      tok.encode(*text, /*add_special=*/true, /*parse_special=*/false);
  const std::vector<int32_t> repeat = tok.encode(kRepeatInstruction, false, false);
  const PerplexityOptions o = library_options(opt, so, tok, repeat);
  // The attention split the scheduler would pick for this policy.
  model.attention_planner().set_split(
      so.attention_split.value_or(o.policy.policy == KvPolicy::Tangram ? AttentionSplit::AheadOfTime
                                                                       : AttentionSplit::Runtime));
  ThreadPool pool(opt.engine.threads);
  const KvType reference_type = o.reference_kv_type.value_or(o.kv_type);
  const bool compared = o.policy.compresses() || o.kv_type != reference_type;
  fmt::print(
      stderr,
      "tangram perplexity: {} | {} tokens | KV policy {}{} on {} pages{} | turns of {} tokens\n",
      opt.model, tokens.size(), kv_policy_name(o.policy.policy),
      o.policy.compresses()
          ? fmt::format(" (ratio {}, scorer {})", o.policy.ratio, o.policy.scorer.name)
          : "",
      kv_type_name(o.kv_type),
      compared
          ? fmt::format("; full KV on {} pages runs alongside for KL", kv_type_name(reference_type))
          : "",
      o.chunk);
  auto r = evaluate_perplexity(model, tokens, o, pool, [compared](const PerplexityProgress& p) {
    fmt::print(stderr, "[window {}/{} turn {}] {} tokens, {} scored: ppl {:.4f}{}\n", p.window + 1,
               p.n_windows, p.turn + 1, p.positions, p.scored, p.ppl,
               compared ? fmt::format(", mean KL {:.6f}", p.mean_kl) : "");
  });
  if (!r) return fail(r.message());
  if (opt.json)
    print_json(*r, o, opt);
  else
    print_text(*r, o);
  return 0;
}

Command register_perplexity(CLI::App& app) {
  auto opt = std::make_shared<PerplexityCmdOptions>();
  PerplexityCmdOptions& ppl = *opt;
  auto* c_ppl = app.add_subcommand(
      "perplexity",
      "Teacher-forced perplexity of a text under a KV policy, turn by turn as serving compresses "
      "it; "
      "with a compressing policy also the mean KL from full KV and the retention reached. Windows: "
      "consecutive -c tokens from an empty cache, BOS first, the remainder not evaluated (as "
      "llama-perplexity), but every position of a window is scored (not only its second half)");
  c_ppl->add_option("-m,--model", ppl.model, "GGUF model")->required()->check(CLI::ExistingFile);
  c_ppl->add_option("-f,--file", ppl.file, "Text file to evaluate")->required();
  c_ppl
      ->add_option("--chunk", ppl.chunk,
                   "Tokens appended per turn; the cache is compressed after each")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  c_ppl->add_flag("--json", ppl.json, "Print the result as JSON on stdout");
  add_engine_options(c_ppl, ppl.engine);
  auto run = [opt, c_ppl] {
    for (const CLI::Option* o : c_ppl->get_options())
      if (o->count() > 0 && !o->get_lnames().empty())
        opt->given.push_back("--" + o->get_lnames().front());
    return cmd_perplexity(*opt);
  };
  return {c_ppl, run, [opt] { return plan_json(*opt); }};
}

}  // namespace tangram::cli
