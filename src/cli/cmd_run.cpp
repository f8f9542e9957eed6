// `tangram run`: load a GGUF model and stream a completion (or one chat turn) to the terminal.
#include <memory>
#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/sampling_flags.h"
#include "cli/chat_prompt.h"
#include "cli/cli_error.h"
#include "cli/commands.h"
#include "engine/generator.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tangram::cli {
int cmd_run(const RunOptions& opt) {
  auto model = Model::load(opt.model);
  if (!model) return fail(model.message());
  auto tok = Tokenizer::from_gguf((*model)->gguf());
  if (!tok) return fail(tok.message());
  const Tokenizer& tokenizer = **tok;

  std::vector<int32_t> prompt;
  if (opt.chat) {
    auto tmpl = pick_chat_template(opt.chat_template, tokenizer);
    if (!tmpl) return fail(tmpl.message());
    std::vector<ChatMessage> messages;
    if (!opt.system.empty()) messages.push_back(chat_message("system", opt.system));
    messages.push_back(chat_message("user", opt.prompt));
    auto tokens = render_chat(*tmpl, tokenizer, messages);
    if (!tokens) return fail(tokens.message());
    prompt = std::move(tokens).value();
  } else {
    prompt = tokenizer.encode(opt.prompt, /*add_special=*/true, /*parse_special=*/false);
  }
  if (prompt.empty()) return fail("the prompt encodes to no tokens; give some text with -p");

  const int64_t ctx = opt.ctx > 0 ? opt.ctx : std::min<int64_t>((*model)->config().context_length, 4096);
  const KvType kv_type = opt.kv_type == "f16" ? KvType::F16 : KvType::F32;
  auto cache = (*model)->new_cache(ctx, kv_type);
  ThreadPool pool(opt.threads);
  Generator gen(**model, tokenizer, pool);

  SamplingParams params = opt.sampling;
  params.max_tokens = opt.max_tokens;
  if (!opt.chat) fmt::print("{}", opt.prompt);
  std::fflush(stdout);
  auto result = gen.generate(*cache, prompt, params, [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  fmt::print("\n");
  if (!result) return fail(result.message());
  if (!opt.quiet) {
    const auto& r = *result;
    const double pf = r.prefill_seconds > 0 ? static_cast<double>(r.prompt_tokens) / r.prefill_seconds : 0;
    // The first generated token comes from the prefill logits; decode time covers the rest.
    const double n_dec = static_cast<double>(std::max<size_t>(r.tokens.size(), 1) - 1);
    const double dc = r.decode_seconds > 0 ? n_dec / r.decode_seconds : 0;
    fmt::print(stderr,
               "\n[{} prompt tokens in {:.3f}s ({:.1f} tok/s) | {} generated in {:.3f}s ({:.1f} tok/s) | "
               "finish: {} | seed {} | {} threads]\n",
               r.prompt_tokens, r.prefill_seconds, pf, r.tokens.size(), r.decode_seconds, dc,
               finish_reason_name(r.finish), r.seed, pool.size());
  }
  return 0;
}

Command register_run(CLI::App& app) {
  auto opt = std::make_shared<RunOptions>();
  RunOptions& run = *opt;
  run.sampling.temperature = 0.8f;
  auto* c_run = app.add_subcommand("run", "Generate text from a prompt, streaming to the terminal");
  c_run->add_option("-m,--model", run.model, "GGUF model")->required()->check(CLI::ExistingFile);
  c_run->add_option("-p,--prompt", run.prompt, "Prompt text (with --chat: the user message)")->required();
  c_run->add_flag("--chat", run.chat, "Wrap the prompt in the model's chat template");
  c_run->add_option("--system", run.system, "System message (with --chat)");
  c_run->add_option("--chat-template", run.chat_template,
                    "Template to use with --chat: chatml, llama3, llama2, or a Jinja file");
  c_run->add_option("-n,--max-tokens", run.max_tokens, "Tokens to generate at most")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c_run->add_option("-t,--threads", run.threads, "Threads (default: all cores)")->check(CLI::NonNegativeNumber);
  c_run->add_option("-c,--ctx", run.ctx, "Context length (default: the model's, at most 4096)")
      ->check(CLI::NonNegativeNumber);
  c_run->add_option("--kv-type", run.kv_type, "KV cache element type")->capture_default_str()
      ->check(CLI::IsMember({"f32", "f16"}));
  c_run->add_flag("-q,--quiet", run.quiet, "Print only the generated text");
  add_sampling_options(c_run, run.sampling);
  return {c_run, [opt] { return cmd_run(*opt); }, {}};
}

}  // namespace tangram::cli
