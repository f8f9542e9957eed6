#include "server/output_constraint.h"

#include <fmt/format.h>

namespace tangram::server {
namespace {

using nlohmann::json;

ApiError schema_error(const std::string& field, const std::string& message) {
  return bad_request(fmt::format("'{}': {}", field, message), field, "unsupported_schema");
}

}  // namespace

GrammarOrError output_format_grammar(const OutputFormat& format, const char* field) {
  if (format.any_object)
    return std::make_shared<const OutputGrammar>(OutputGrammar::json_value(any_json_object()));
  Result<JsonSchemaGraph> graph = compile_json_schema(format.schema);
  const std::string schema_field =
      std::string(field) +
      (std::string_view(field) == "response_format" ? ".json_schema.schema" : ".schema");
  if (!graph) return schema_error(schema_field, graph.message());
  return std::make_shared<const OutputGrammar>(OutputGrammar::json_value(std::move(*graph)));
}

GrammarOrError tool_call_grammar(ToolCallSyntax syntax, const json& tools, const ToolChoice& choice,
                                 bool parallel) {
  const bool hermes = syntax == ToolCallSyntax::Hermes;
  if (!hermes && syntax != ToolCallSyntax::Llama3)
    return bad_request(
        fmt::format("'tool_choice' \"required\" or a named function is supported for the Hermes "
                    "(Qwen) and Llama 3 tool-call syntaxes; this model's template writes calls in "
                    "the {} syntax: use \"auto\"",
                    tool_call_syntax_name(syntax)),
        "tool_choice", "unsupported_value");
  auto out = std::make_shared<OutputGrammar>();
  std::vector<int32_t> calls;  // the call object's alternatives: one per tool
  bool named_found = false;
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& fn = tools[i]["function"];
    const std::string name = fn["name"].get<std::string>();
    if (choice.mode == ToolChoice::Mode::Named && name != choice.name) continue;
    named_found = true;
    const json params = fn.contains("parameters") && !fn["parameters"].is_null()
                            ? fn["parameters"]
                            : json{{"type", "object"}};
    const json call = {
        {"type", "object"},
        {"properties",
         {{"name", {{"const", name}}}, {hermes ? "arguments" : "parameters", params}}},
        {"required", {"name", hermes ? "arguments" : "parameters"}},
        {"additionalProperties", false}};
    Result<int32_t> added = out->graph.add_schema(call);
    if (!added)
      return schema_error(fmt::format("tools[{}].function.parameters", i), added.message());
    const auto& alternatives = out->graph.choices[static_cast<size_t>(*added)];
    calls.insert(calls.end(), alternatives.begin(), alternatives.end());
  }
  if (!named_found)
    return bad_request(
        fmt::format("'tool_choice' names the function '{}', which is not in 'tools'", choice.name),
        "tool_choice", "invalid_value");
  out->graph.choices.push_back(std::move(calls));
  const auto root = static_cast<int32_t>(out->graph.choices.size() - 1);
  out->graph.root = root;
  const bool repeat = parallel && choice.mode == ToolChoice::Mode::Required;
  if (hermes) {
    out->segments = {{false, "<tool_call>\n", -1}, {true, "", root}, {false, "\n</tool_call>", -1}};
    if (repeat) out->segments.push_back({false, "\n", -1});
    out->end_at = 3;
  } else {
    out->segments = {{true, "", root}};
    if (repeat) out->segments.push_back({false, ";", -1});
    out->end_at = 1;
  }
  out->loop = repeat;
  return std::shared_ptr<const OutputGrammar>(std::move(out));
}

}  // namespace tangram::server
