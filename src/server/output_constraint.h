// Structured output for the OpenAI endpoints: a response_format / text.format, or a tool_choice
// that forces a call, compiled into the grammar the request's decoding is held to
// (grammar/output_matcher.h). A schema or a tool syntax it cannot hold output to is a 400 that
// says what, never an unconstrained answer.
//
// Tool calls are written in the chat template's own syntax, so the constraint is that syntax with
// the call object's schema inside: Hermes (Qwen2.5/Qwen3) `<tool_call>\n{"name": ..., "arguments":
// {...}}\n</tool_call>`, repeated on new lines when parallel_tool_calls; Llama 3.x `{"name": ...,
// "parameters": {...}}`, several separated by ';'. A named function allows that function only,
// once. Other syntaxes (Qwen3-Coder XML, Mistral's [TOOL_CALLS], which is a control token) are
// refused.
#pragma once

#include <memory>
#include <variant>

#include <nlohmann/json.hpp>

#include "chat/tool_calls.h"
#include "grammar/output_matcher.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace tangram::server {

using GrammarOrError = std::variant<std::shared_ptr<const OutputGrammar>, ApiError>;

// field: the request field the format came in ("response_format" or "text.format").
GrammarOrError output_format_grammar(const OutputFormat& format, const char* field);

// tools: the chat form ([{"type": "function", "function": {"name", "parameters"?}}]).
GrammarOrError tool_call_grammar(ToolCallSyntax syntax, const nlohmann::json& tools,
                                 const ToolChoice& choice, bool parallel);

}  // namespace tangram::server
