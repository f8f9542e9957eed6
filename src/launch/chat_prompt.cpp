#include "launch/chat_prompt.h"

#include <fmt/format.h>

#include "common/file_text.h"

namespace tangram {

Result<ChatTemplate> pick_chat_template(const std::string& override_name, const Tokenizer& tok) {
  if (!override_name.empty()) {
    auto builtin = ChatTemplate::builtin(override_name);
    if (builtin) return builtin;
    auto text = read_file_text(override_name, "the chat template");
    if (!text)
      return make_error(
          "--chat-template '{}' is neither a builtin (chatml, llama3, llama2) nor a "
          "readable file ({})",
          override_name, text.message());
    return ChatTemplate::parse(*text);
  }
  if (!tok.chat_template().empty()) return ChatTemplate::parse(tok.chat_template());
  fmt::print(stderr, "note: the model has no chat template; using ChatML\n");
  return ChatTemplate::builtin("chatml");
}

Result<std::vector<int32_t>> render_chat(const ChatTemplate& tmpl, const Tokenizer& tok,
                                         const std::vector<ChatMessage>& messages) {
  const std::string bos = tok.bos() >= 0 ? tok.token_text(tok.bos()) : "";
  const std::string eos = tok.eos() >= 0 ? tok.token_text(tok.eos()) : "";
  TG_ASSIGN(RenderedChat chat, tmpl.render_protected(messages, /*add_generation_prompt=*/true, bos,
                                                     eos, tok.parse_special_texts()));
  return tok.encode(chat.text, /*add_special=*/false, /*parse_special=*/true,
                    chat.protected_ranges);
}

ChatMessage chat_message(std::string role, std::string content) {
  ChatMessage m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

}  // namespace tangram
