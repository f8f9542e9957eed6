// `tangram chat`: an interactive multi-turn conversation. Each turn renders the whole
// conversation with the chat template and submits it under one session id; the engine finds
// the previous turns' KV resident and prefills only what is new, which the per-turn line shows.
#include <unistd.h>
#include <memory>

#include <cstdio>
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "cli/cli_error.h"
#include "cli/command.h"
#include "cli/commands.h"
#include "cli/config_json.h"
#include "cli/local_engine.h"
#include "cli/sampling_flags.h"
#include "common/units.h"
#include "engine/engine.h"
#include "launch/chat_prompt.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tangram::cli {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

void print_help() {
  fmt::print(
      stderr,
      "Type a message and press Enter. Commands:\n"
      "  /reset   start a new conversation (the old one's KV is evicted when memory is needed)\n"
      "  /stats   KV memory and session figures\n"
      "  /quit    leave (also Ctrl-D)\n");
}

void print_stats(const SchedulerStats& st) {
  fmt::print(stderr,
             "[KV: {} of {} pages in use ({} wasted slots, {:.1f}%) | {} sessions, {} resident, {} "
             "evicted | {} steps, {} prefill and {} decode tokens]\n",
             st.pool.used_pages, st.pool.total_pages, st.pool.wasted_slots,
             100.0 * st.pool.waste_fraction(), st.sessions, st.resident_sessions,
             st.session_evictions, st.steps, st.prefill_tokens, st.decode_tokens);
}

}  // namespace

int cmd_chat(const ChatOptions& opt) {
  auto local = start_local_engine(opt.model, opt.engine);
  if (!local) return fail(local.message());
  const Model& model = *local->loaded.model;
  const Tokenizer& tokenizer = *local->loaded.tokenizer;
  Engine& engine = *local->engine;
  auto tmpl = pick_chat_template(opt.chat_template, tokenizer);
  if (!tmpl) return fail(tmpl.message());

  const bool interactive = isatty(STDIN_FILENO) != 0;
  const ModelConfig& c = model.config();
  const SchedulerStats st0 = engine.stats();
  const SchedulerOptions& so = engine.options();
  if (!opt.quiet) {
    fmt::print(
        stderr,
        "tangram chat: {} ({} layers, {} KV heads), {} threads | KV memory {} = {} pages of "
        "{} tokens x {} heads ({}) | KV policy {}{}\n",
        opt.model, c.n_layers, c.n_kv_head, engine.threads(),
        format_bytes(static_cast<double>(so.kv_memory)), st0.pool.total_pages, so.page_tokens,
        so.page_group_size, kv_type_name(so.kv_type), kv_policy_name(so.compression.policy),
        so.compression.compresses() ? fmt::format(" (ratio {}, scorer {})", so.compression.ratio,
                                                  so.compression.scorer.name)
                                    : std::string());
    if (interactive) print_help();
  }

  std::vector<ChatMessage> messages;
  if (!opt.system.empty()) messages.push_back(chat_message("system", opt.system));
  int conversation = 1;
  int turn = 0;
  std::string line;
  for (;;) {
    if (interactive) {
      fmt::print(stderr, "> ");
      std::fflush(stderr);
    }
    if (!std::getline(std::cin, line)) break;
    const std::string text = trim(line);
    if (text.empty()) continue;
    if (text == "/quit" || text == "/exit") break;
    if (text == "/help") {
      print_help();
      continue;
    }
    if (text == "/stats") {
      engine.wait_idle();
      print_stats(engine.stats());
      continue;
    }
    if (text == "/reset") {
      messages.resize(opt.system.empty() ? 0 : 1);
      ++conversation;
      turn = 0;
      if (!opt.quiet) fmt::print(stderr, "[new conversation]\n");
      continue;
    }

    messages.push_back(chat_message("user", text));
    auto prompt = render_chat(*tmpl, tokenizer, messages);
    if (!prompt) {
      messages.pop_back();
      fmt::print(stderr, "error: {}\n", prompt.message());
      continue;
    }
    Request req;
    req.prompt = std::move(prompt).value();
    req.params = opt.sampling;
    req.params.max_tokens = opt.max_tokens;
    req.session_id = fmt::format("chat-{}", conversation);
    req.on_token = [](const TokenEvent& e) {
      std::fwrite(e.text.data(), 1, e.text.size(), stdout);
      std::fflush(stdout);
    };
    auto result = engine.generate(std::move(req));
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (!result || result->finish == FinishReason::Error) {
      // The turn is dropped; the conversation continues from before it.
      messages.pop_back();
      fmt::print(stderr, "error: {}\n", result ? result->error : result.message());
      continue;
    }
    ++turn;
    messages.push_back(chat_message("assistant", result->text));
    if (!opt.quiet) {
      const RequestResult& r = *result;
      const int64_t fresh = r.usage.prompt_tokens - r.usage.cached_tokens;
      const GenerationRates rates = generation_rates(r, fresh);
      fmt::print(
          stderr,
          "[turn {}: {} prompt tokens, {} reused from the session, {} prefilled in {:.0f} ms "
          "({:.1f} tok/s) | {} generated in {:.2f} s ({:.1f} tok/s) | finish: {}]\n",
          turn, r.usage.prompt_tokens, r.usage.cached_tokens, fresh,
          1000.0 * r.timing.prefill_seconds, rates.prefill_tok_s, r.usage.completion_tokens,
          r.timing.decode_seconds, rates.decode_tok_s, finish_reason_name(r.finish));
      if (r.compression.compressions > 0)
        fmt::print(
            stderr,
            "[KV compressed ({}): {} -> {} entries ({:.0f}% kept), {} pages freed, {:.0f} ms]\n",
            kv_policy_name(so.compression.policy), r.compression.entries_before,
            r.compression.entries_after,
            100.0 * static_cast<double>(r.compression.entries_after) /
                static_cast<double>(std::max<int64_t>(r.compression.entries_before, 1)),
            r.compression.pages_freed, 1000.0 * r.compression.seconds);
    }
  }
  return 0;
}

Command register_chat(CLI::App& app) {
  auto opt = std::make_shared<ChatOptions>();
  ChatOptions& chat = *opt;
  chat.sampling.temperature = 0.8f;
  auto* c_chat = app.add_subcommand(
      "chat", "Interactive multi-turn chat; each turn reuses the conversation's resident KV cache");
  c_chat->add_option("-m,--model", chat.model, "GGUF model")->required()->check(CLI::ExistingFile);
  c_chat->add_option("--system", chat.system, "System message");
  c_chat->add_option(
      "--chat-template", chat.chat_template,
      "Template: chatml, llama3, llama2, or a Jinja file (default: the model's own)");
  c_chat->add_option("-n,--max-tokens", chat.max_tokens, "Most tokens per answer")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c_chat->add_flag("-q,--quiet", chat.quiet, "No banner or per-turn statistics");
  add_engine_options(c_chat, chat.engine);
  add_sampling_options(c_chat, chat.sampling);
  return {c_chat, [opt] { return cmd_chat(*opt); }, [opt] { return plan_json(*opt); }};
}

}  // namespace tangram::cli
