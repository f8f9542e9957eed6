// Tool calls streamed while the model writes them, so that a client sees a call take shape
// (its name, then its arguments piece by piece) instead of nothing and then everything.
//
// Fed every piece of a reply, a ToolCallStreamer announces a call once its name is complete and
// passes on its arguments' JSON text as it grows, whitespace outside strings dropped (the pieces
// join into compact JSON). Whether the reply really is calls is still decided at its end by
// parse_tool_calls(); the streams check what they sent against it there.
//
// Streams the syntaxes whose calls are JSON (Hermes, Llama 3, both Mistral forms). Qwen3-Coder's
// XML parameters are typed only once a call is whole, so a QwenXml call is announced with its
// arguments at the end; so are arguments a model writes as a JSON string ("{\"a\": 1}").
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_calls.h"

namespace tangram {

// A piece of one call.
struct ToolCallDelta {
  int index = 0;       // which call of the reply, from 0
  bool opens = false;  // the call's first piece: `name` is set
  std::string name;
  std::string arguments;  // more of its arguments' text
};

class ToolCallStreamer {
 public:
  explicit ToolCallStreamer(ToolCallSyntax syntax);
  ~ToolCallStreamer();
  ToolCallStreamer(ToolCallStreamer&&) noexcept;
  ToolCallStreamer& operator=(ToolCallStreamer&&) noexcept;

  // The next piece of the reply; returns the call pieces it completes, in order.
  std::vector<ToolCallDelta> append(std::string_view text);
  // Calls announced so far.
  int calls() const;
  // The arguments text sent for call i so far, and whether its value ended.
  const std::string& arguments(int i) const;
  bool arguments_complete(int i) const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace tangram
