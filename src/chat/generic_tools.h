// Tool calling for a chat template that shows no tool-call syntax of its own (chatml, llama2,
// many fine-tunes): the server teaches one itself. The tools and the way to call them go into the
// system prompt, in the Hermes form (`<tool_call>{"name", "arguments"}</tool_call>`), which
// parse_tool_calls(ToolCallSyntax::Hermes) reads back and a forced call's grammar writes; earlier
// calls and their results are written into the turns as plain text the template can render:
// an assistant's calls after its text, a tool's result as a user turn in <tool_response> tags.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"

namespace tangram {

// The system prompt's addition: the tools as JSON, and how to call them.
std::string generic_tool_prompt(const nlohmann::json& tools);

// `messages` as a template without tools renders them: the tool prompt appended to the first
// system message (or a system message of its own, first), every assistant's tool_calls written
// into its content, and consecutive tool results joined into one user turn.
std::vector<ChatMessage> with_generic_tools(const std::vector<ChatMessage>& messages,
                                            const nlohmann::json& tools);

}  // namespace tangram
