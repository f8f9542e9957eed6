// `tangram run`: load a GGUF model and stream a completion (or one chat turn) to the terminal.
#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

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

}  // namespace tangram::cli
