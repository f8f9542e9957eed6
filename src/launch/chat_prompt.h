// Chat prompts for the CLI: which template to use and how a conversation becomes tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "common/result.h"
#include "tokenizer/tokenizer.h"

namespace tangram {

// `override_name` (a builtin name: chatml, llama3, llama2; or a Jinja file) when given, else
// the model's own template, else ChatML (with a note on stderr).
Result<ChatTemplate> pick_chat_template(const std::string& override_name, const Tokenizer& tok);

// Renders the conversation with the generation prompt and encodes it; the template writes BOS
// itself where its format wants one, so none is added here. Control-token texts typed into a
// message encode as text (ChatTemplate::render_protected), so a message cannot end its turn.
Result<std::vector<int32_t>> render_chat(const ChatTemplate& tmpl, const Tokenizer& tok,
                                         const std::vector<ChatMessage>& messages);

ChatMessage chat_message(std::string role, std::string content);

}  // namespace tangram
