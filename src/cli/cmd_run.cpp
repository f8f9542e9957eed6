// `tangram run`: load a GGUF model and stream a completion (or one chat turn) to the terminal.
// It goes through the Engine, the same paged KV path as `serve` and `chat`, with one request.
#include <algorithm>
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "cli/cli_error.h"
#include "cli/command.h"
#include "cli/commands.h"
#include "cli/config_json.h"
#include "cli/local_engine.h"
#include "cli/sampling_flags.h"
#include "engine/engine.h"
#include "launch/chat_prompt.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tangram::cli {
namespace {

Result<std::vector<int32_t>> encode_prompt(const RunOptions& opt, const Tokenizer& tokenizer) {
  if (!opt.chat) return tokenizer.encode(opt.prompt, /*add_special=*/true, /*parse_special=*/false);
  TG_ASSIGN(ChatTemplate tmpl, pick_chat_template(opt.chat_template, tokenizer));
  std::vector<ChatMessage> messages;
  if (!opt.system.empty()) messages.push_back(chat_message("system", opt.system));
  messages.push_back(chat_message("user", opt.prompt));
  return render_chat(tmpl, tokenizer, messages);
}

void print_run_stats(const RequestResult& r, int threads) {
  const GenerationRates rates = generation_rates(r, r.usage.prompt_tokens);
  fmt::print(
      stderr,
      "\n[{} prompt tokens in {:.3f}s ({:.1f} tok/s) | {} generated in {:.3f}s ({:.1f} tok/s) | "
      "finish: {} | seed {} | {} threads]\n",
      r.usage.prompt_tokens, r.timing.prefill_seconds, rates.prefill_tok_s,
      r.usage.completion_tokens, r.timing.decode_seconds, rates.decode_tok_s,
      finish_reason_name(r.finish), r.seed, threads);
}

}  // namespace

int cmd_run(const RunOptions& opt) {
  auto local = start_local_engine(opt.model, opt.engine);
  if (!local) return fail(local.message());
  Engine& engine = *local->engine;
  auto prompt = encode_prompt(opt, *local->loaded.tokenizer);
  if (!prompt) return fail(prompt.message());
  if (prompt->empty()) return fail("the prompt encodes to no tokens; give some text with -p");

  Request req;
  req.prompt = std::move(prompt).value();
  req.params = opt.sampling;
  req.params.max_tokens = opt.max_tokens;
  req.on_token = [](const TokenEvent& e) {
    std::fwrite(e.text.data(), 1, e.text.size(), stdout);
    std::fflush(stdout);
  };
  if (!opt.chat) fmt::print("{}", opt.prompt);
  std::fflush(stdout);
  auto result = engine.generate(std::move(req));
  fmt::print("\n");
  if (!result) return fail(result.message());
  if (result->finish == FinishReason::Error) return fail(result->error);
  if (!opt.quiet) print_run_stats(*result, engine.threads());
  return 0;
}

Command register_run(CLI::App& app) {
  auto opt = std::make_shared<RunOptions>();
  RunOptions& run = *opt;
  run.sampling.temperature = 0.8f;
  auto* c_run = app.add_subcommand("run", "Generate text from a prompt, streaming to the terminal");
  c_run->add_option("-m,--model", run.model, "GGUF model")->required()->check(CLI::ExistingFile);
  c_run->add_option("-p,--prompt", run.prompt, "Prompt text (with --chat: the user message)")
      ->required();
  auto* chat = c_run->add_flag("--chat", run.chat, "Wrap the prompt in the model's chat template");
  // Without --chat there is no template to put them in: refused rather than ignored.
  c_run->add_option("--system", run.system, "System message (needs --chat)")->needs(chat);
  c_run
      ->add_option(
          "--chat-template", run.chat_template,
          "Template to use with --chat: chatml, llama3, llama2, or a Jinja file (needs --chat)")
      ->needs(chat);
  c_run->add_option("-n,--max-tokens", run.max_tokens, "Tokens to generate at most")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c_run->add_flag("-q,--quiet", run.quiet, "Print only the generated text");
  add_engine_options(c_run, run.engine);
  add_sampling_options(c_run, run.sampling);
  return {c_run, [opt] { return cmd_run(*opt); }, [opt] { return plan_json(*opt); }};
}

}  // namespace tangram::cli
