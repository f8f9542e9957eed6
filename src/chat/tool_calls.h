// Tool calls in a model's own syntax: which syntax a chat template teaches its model, and the
// calls found in a reply written in it. Each family's templates render `tools` into the prompt
// and show the model how to answer with a call; the reply is parsed back into OpenAI's
// tool_calls (a name and the arguments as JSON text).
//
// Syntaxes (from the templates in data/models/chat-templates):
//   Hermes     Qwen2.5, Qwen3, Hermes: <tool_call>{"name": ..., "arguments": {...}}</tool_call>,
//   repeated QwenXml    Qwen3-Coder:
//   <tool_call><function=NAME><parameter=P>VALUE</parameter>...</function></tool_call> Llama3
//   Llama 3.1-3.3: {"name": ..., "parameters": {...}}, optionally after <|python_tag|>,
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

// tool_call_start() of a reply that grows delta by delta, scanning only what each delta adds (and
// the few bytes before it that a marker may straddle): a stream asks after every token, and a
// scan of the whole reply each time would cost the square of its length.
class ToolCallStartScanner {
 public:
  explicit ToolCallStartScanner(ToolCallSyntax syntax) : syntax_(syntax) {}
  // Takes the next piece of the reply; returns tool_call_start(syntax, all pieces taken so far).
  std::optional<size_t> append(std::string_view delta);

 private:
  std::optional<size_t> append_marked(std::string_view delta, std::string_view marker);
  std::optional<size_t> append_llama3(std::string_view delta);

  ToolCallSyntax syntax_;
  size_t size_ = 0;       // bytes taken so far
  bool decided_ = false;  // the answer can no longer change
  std::optional<size_t> decided_at_;
  std::string tail_;  // marker syntaxes: the last bytes taken, one fewer than the marker's
  std::string head_;  // Llama 3: the first bytes after the leading whitespace (at most
                      // <|python_tag|>'s length)
};

}  // namespace tangram
