// Tool calls in each model family's own syntax: detected from the real templates, parsed from
// replies as those templates teach them, and malformed replies kept as content.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/tool_calls.h"
#include "support/test_support.h"

namespace tangram {
namespace {

using nlohmann::json;

ToolCallSyntax syntax_of(const std::string& name) {
  const std::string src =
      testing::read_file(testing::data_file("models/chat-templates/" + name + ".jinja"));
  EXPECT_FALSE(src.empty()) << name;
  return detect_tool_call_syntax(src);
}

TEST(ToolCalls, EachFamilysSyntaxIsFoundInItsRealTemplate) {
  EXPECT_EQ(syntax_of("Qwen-Qwen2.5-7B-Instruct"), ToolCallSyntax::Hermes);
  EXPECT_EQ(syntax_of("Qwen-Qwen3-0.6B"), ToolCallSyntax::Hermes);
  EXPECT_EQ(syntax_of("NousResearch-Hermes-3-Llama-3.1-8B-tool_use"), ToolCallSyntax::Hermes);
  EXPECT_EQ(syntax_of("Qwen3-Coder"), ToolCallSyntax::QwenXml);
  EXPECT_EQ(syntax_of("meta-llama-Llama-3.1-8B-Instruct"), ToolCallSyntax::Llama3);
  EXPECT_EQ(syntax_of("meta-llama-Llama-3.2-3B-Instruct"), ToolCallSyntax::Llama3);
  EXPECT_EQ(syntax_of("meta-llama-Llama-3.3-70B-Instruct"), ToolCallSyntax::Llama3);
  EXPECT_EQ(syntax_of("mistralai-Mistral-Nemo-Instruct-2407"), ToolCallSyntax::MistralJson);
  EXPECT_EQ(syntax_of("Mistral-Small-3.2-24B-Instruct-2506"), ToolCallSyntax::MistralArgs);
  EXPECT_EQ(syntax_of("google-gemma-2-2b-it"), ToolCallSyntax::None);
}

void expect_call(const ParsedToolCall& c, const std::string& name, const json& args) {
  EXPECT_EQ(c.name, name);
  EXPECT_EQ(json::parse(c.arguments), args) << c.arguments;
}

TEST(ToolCalls, Hermes) {
  const ParsedReply r = parse_tool_calls(ToolCallSyntax::Hermes,
                                         "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", "
                                         "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
                                         "<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
                                         "\"{\\\"tz\\\": \\\"CET\\\"}\"}\n</tool_call>");
  EXPECT_EQ(r.content, "Let me check.");
  ASSERT_EQ(r.calls.size(), 2u);
  expect_call(r.calls[0], "get_weather", {{"city", "Paris"}});
  expect_call(r.calls[1], "get_time", {{"tz", "CET"}});
  // The model stopped after the call, before its closing tag.
  const ParsedReply open =
      parse_tool_calls(ToolCallSyntax::Hermes, "<tool_call>{\"name\": \"f\", \"arguments\": {}}");
  ASSERT_EQ(open.calls.size(), 1u);
  expect_call(open.calls[0], "f", json::object());
  EXPECT_EQ(open.content, "");
}

TEST(ToolCalls, QwenXml) {
  const ParsedReply r =
      parse_tool_calls(ToolCallSyntax::QwenXml,
                       "<tool_call>\n<function=search>\n<parameter=query>\nred cats\n</parameter>\n"
                       "<parameter=limit>\n5\n</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(r.calls.size(), 1u);
  expect_call(r.calls[0], "search", {{"query", "red cats"}, {"limit", 5}});
}

TEST(ToolCalls, Llama3) {
  const ParsedReply one = parse_tool_calls(
      ToolCallSyntax::Llama3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}");
  ASSERT_EQ(one.calls.size(), 1u);
  expect_call(one.calls[0], "get_weather", {{"city", "Oslo"}});
  const ParsedReply two = parse_tool_calls(ToolCallSyntax::Llama3,
                                           "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; "
                                           "{\"name\": \"b\", \"parameters\": {\"x\": \"}\"}}");
  ASSERT_EQ(two.calls.size(), 2u);
  expect_call(two.calls[1], "b", {{"x", "}"}});
  // Prose that merely holds braces is content.
  const ParsedReply prose =
      parse_tool_calls(ToolCallSyntax::Llama3, "Use {name} as a placeholder.");
  EXPECT_TRUE(prose.calls.empty());
  EXPECT_EQ(prose.content, "Use {name} as a placeholder.");
}

TEST(ToolCalls, Mistral) {
  const ParsedReply nemo =
      parse_tool_calls(ToolCallSyntax::MistralJson,
                       "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}, \"id\": "
                       "\"abc123def\"}, {\"name\": \"g\", \"arguments\": {}}]");
  ASSERT_EQ(nemo.calls.size(), 2u);
  expect_call(nemo.calls[0], "f", {{"a", 1}});
  EXPECT_EQ(nemo.calls[0].id, "abc123def");
  const ParsedReply small = parse_tool_calls(
      ToolCallSyntax::MistralArgs,
      "Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}[TOOL_CALLS]now[ARGS]{}");
  EXPECT_EQ(small.content, "Sure.");
  ASSERT_EQ(small.calls.size(), 2u);
  expect_call(small.calls[0], "get_weather", {{"city", "Rome"}});
  expect_call(small.calls[1], "now", json::object());
}

TEST(ToolCalls, MalformedCallsStayContent) {
  for (const auto& [syntax, text] : std::vector<std::pair<ToolCallSyntax, std::string>>{
           {ToolCallSyntax::Hermes, "<tool_call>{\"name\": \"f\", \"arguments\": {</tool_call>"},
           {ToolCallSyntax::Hermes, "<tool_call>{\"arguments\": {}}</tool_call>"},
           {ToolCallSyntax::Hermes, "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>"},
           {ToolCallSyntax::QwenXml, "<tool_call><function=f><parameter=x>1</tool_call>"},
           {ToolCallSyntax::Llama3, "{\"name\": \"f\", \"parameters\": {}} and more"},
           {ToolCallSyntax::Llama3, "{\"name\": \"f\""},
           {ToolCallSyntax::MistralJson, "[TOOL_CALLS]not json"},
           {ToolCallSyntax::MistralArgs, "[TOOL_CALLS]f{\"a\": 1}"},
           {ToolCallSyntax::MistralArgs, "[TOOL_CALLS][ARGS]{}"}}) {
    const ParsedReply r = parse_tool_calls(syntax, text);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
  }
  EXPECT_EQ(parse_tool_calls(ToolCallSyntax::None, "<tool_call>{}</tool_call>").content,
            "<tool_call>{}</tool_call>");
}

TEST(ToolCalls, StreamingHoldsBackWhatMayStartACall) {
  EXPECT_EQ(tool_call_start(ToolCallSyntax::Hermes, "Hello"), std::nullopt);
  EXPECT_EQ(tool_call_start(ToolCallSyntax::Hermes, "Hello <tool"), 6u);
  EXPECT_EQ(tool_call_start(ToolCallSyntax::Hermes, "Hello <tool_call>{\"na"), 6u);
  EXPECT_EQ(tool_call_start(ToolCallSyntax::Hermes, "a < b"), std::nullopt);
  EXPECT_EQ(tool_call_start(ToolCallSyntax::MistralArgs, "x [TOOL_"), 2u);
  EXPECT_EQ(tool_call_start(ToolCallSyntax::Llama3, "  {\"name\""), 0u);
  EXPECT_EQ(tool_call_start(ToolCallSyntax::Llama3, "<|pyth"), 0u);
  EXPECT_EQ(tool_call_start(ToolCallSyntax::Llama3, "\n"), 0u);
  EXPECT_EQ(tool_call_start(ToolCallSyntax::Llama3, "Sure {x}"), std::nullopt);
  EXPECT_EQ(tool_call_start(ToolCallSyntax::None, "<tool_call>"), std::nullopt);
}

// Replies in every family's syntax: calls, content around them, markers split or only begun,
// malformed calls, prose that looks like a call.
std::vector<std::pair<ToolCallSyntax, std::string>> replies_of_every_family() {
  return {
      {ToolCallSyntax::Hermes,
       "Let me check.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>"},
      {ToolCallSyntax::Hermes, "a <tools are <tool fine <tool_call>{broken"},
      {ToolCallSyntax::Hermes, "<<tool_call<tool_call>"},
      {ToolCallSyntax::Hermes, "no call at all"},
      {ToolCallSyntax::QwenXml,
       "<tool_call>\n<function=search>\n<parameter=q>\nred\n</parameter>\n</function>\n</"
       "tool_call>"},
      {ToolCallSyntax::QwenXml, "x <tool_call><function=f><parameter=x>1</tool_call>"},
      {ToolCallSyntax::Llama3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}"},
      {ToolCallSyntax::Llama3,
       "  \n<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": "
       "{}}"},
      {ToolCallSyntax::Llama3, " <|pyth0n|> no"},
      {ToolCallSyntax::Llama3, "Use {name} as a placeholder."},
      {ToolCallSyntax::Llama3, "   \n\t "},
      {ToolCallSyntax::MistralJson,
       "Sure [TOOL_[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}, \"id\": "
       "\"abc123def\"}]"},
      {ToolCallSyntax::MistralJson, "[TOOL_CALLS]not json"},
      {ToolCallSyntax::MistralArgs,
       "Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}[TOOL_CALLS]now[ARGS]{}"},
      {ToolCallSyntax::MistralArgs, "[TOOL_CALLS][ARGS]{}"},
      {ToolCallSyntax::None, "<tool_call>{}</tool_call>"},
  };
}

// The incremental scanner answers as tool_call_start() on the whole text so far, however the
// reply is cut into deltas: at every byte position (two pieces), byte by byte, and at every pair
// of positions (three pieces, the middle one possibly empty).
TEST(ToolCalls, IncrementalStartEqualsWholeTextStartAtEverySplit) {
  for (const auto& [syntax, text] : replies_of_every_family()) {
    SCOPED_TRACE(text);
    const auto feed = [&, syntax = syntax, &text = text](const std::vector<size_t>& cuts) {
      ToolCallStartScanner scanner(syntax);
      size_t from = 0;
      for (size_t cut : cuts) {
        const std::optional<size_t> got =
            scanner.append(std::string_view(text).substr(from, cut - from));
        ASSERT_EQ(got, tool_call_start(syntax, std::string_view(text).substr(0, cut)))
            << "after " << cut << " bytes";
        from = cut;
      }
    };
    std::vector<size_t> bytes;
    for (size_t i = 0; i <= text.size(); ++i) bytes.push_back(i);
    feed(bytes);
    for (size_t i = 0; i <= text.size(); ++i)
      for (size_t j = i; j <= text.size(); ++j) feed({i, j, text.size()});
  }
}

}  // namespace
}  // namespace tangram
