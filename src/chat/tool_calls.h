// Tool calls in a model's own syntax: which syntax a chat template teaches its model, and the
// calls found in a reply written in it. Each family's templates render `tools` into the prompt
// and show the model how to answer with a call; the reply is parsed back into OpenAI's
// tool_calls (a name and the arguments as JSON text).
//
// Syntaxes (from the templates in ../shared/models/chat-templates):
//   Hermes     Qwen2.5, Qwen3, Hermes: <tool_call>{"name": ..., "arguments": {...}}</tool_call>, repeated
//   QwenXml    Qwen3-Coder: <tool_call><function=NAME><parameter=P>VALUE</parameter>...</function></tool_call>
//   Llama3     Llama 3.1-3.3: {"name": ..., "parameters": {...}}, optionally after <|python_tag|>,
//              several separated by ';'
//   MistralJson  Mistral Nemo: [TOOL_CALLS][{"name": ..., "arguments": {...}, "id": ...}, ...]
//   MistralArgs  Mistral Small 3.2, Devstral: [TOOL_CALLS]NAME[ARGS]{...}, repeated
// A reply that does not parse as calls in its syntax is content: never an error.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tangram {

enum class ToolCallSyntax { None, Hermes, QwenXml, Llama3, MistralJson, MistralArgs };

std::string_view tool_call_syntax_name(ToolCallSyntax s);

// The syntax a template's source teaches, or None (a template that does not take tools).
ToolCallSyntax detect_tool_call_syntax(std::string_view template_source);

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // a JSON object's text
  std::string id;         // the model's own id where its syntax has one ("" otherwise)
};

struct ParsedReply {
  std::string content;  // the text outside the calls (trimmed)
  std::vector<ParsedToolCall> calls;
};

ParsedReply parse_tool_calls(ToolCallSyntax syntax, std::string_view reply);

// Where a reply's text may start a call in this syntax: the offset of the first marker (or of a
// prefix of one at the very end, which the next tokens may complete), for streaming, which must
// hold such text back until the reply ends. nullopt: everything so far is plain content.
std::optional<size_t> tool_call_start(ToolCallSyntax syntax, std::string_view text);

}  // namespace tangram
