// `tangram run`: load a GGUF model and stream a completion (or one chat turn) to the terminal.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "chat/chat_template.h"
#include "cli/commands.h"
#include "engine/generator.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tangram::cli {
namespace {

// The template to render: --chat-template (a builtin name or a file), else the model's own,
// else ChatML, the most common format.
Result<ChatTemplate> pick_template(const RunOptions& opt, const Tokenizer& tok) {
  if (!opt.chat_template.empty()) {
    auto builtin = ChatTemplate::builtin(opt.chat_template);
    if (builtin) return builtin;
    std::ifstream in(opt.chat_template, std::ios::binary);
    if (!in)
      return make_error("--chat-template '{}' is neither a builtin (chatml, llama3, llama2) nor a readable file",
                        opt.chat_template);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ChatTemplate::parse(ss.str());
  }
  if (!tok.chat_template().empty()) return ChatTemplate::parse(tok.chat_template());
  fmt::print(stderr, "note: the model has no chat template; using ChatML\n");
  return ChatTemplate::builtin("chatml");
}

int fail(const std::string& msg) {
  fmt::print(stderr, "error: {}\n", msg);
  return 1;
}

}  // namespace

int cmd_run(const RunOptions& opt) {
  auto model = Model::load(opt.model);
  if (!model) return fail(model.message());
  auto tok = Tokenizer::from_gguf((*model)->gguf());
  if (!tok) return fail(tok.message());
  const Tokenizer& tokenizer = **tok;

  std::vector<int32_t> prompt;
  if (opt.chat) {
    auto tmpl = pick_template(opt, tokenizer);
    if (!tmpl) return fail(tmpl.message());
    std::vector<ChatMessage> messages;
    auto message = [](std::string role, std::string content) {
      ChatMessage m;
      m.role = std::move(role);
      m.content = std::move(content);
      return m;
    };
    if (!opt.system.empty()) messages.push_back(message("system", opt.system));
    messages.push_back(message("user", opt.prompt));
    const std::string bos = tokenizer.bos() >= 0 ? tokenizer.token_text(tokenizer.bos()) : "";
    const std::string eos = tokenizer.eos() >= 0 ? tokenizer.token_text(tokenizer.eos()) : "";
    auto text = tmpl->render(messages, /*add_generation_prompt=*/true, bos, eos);
    if (!text) return fail(text.message());
    // The template writes BOS itself where the format wants it.
    prompt = tokenizer.encode(*text, /*add_special=*/false, /*parse_special=*/true);
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
