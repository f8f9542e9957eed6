// The grammars of forced tool calls and response formats: random outputs they admit (walked
// byte by byte through the matcher) parse back, through the template family's own tool-call
// parser, into calls of the offered tools with arguments of their schemas.
#include "server/output_constraint.h"

#include <random>

#include <gtest/gtest.h>

namespace tangram::server {
namespace {

using nlohmann::json;

// A random output the grammar lets end, or "" when the walk ran out of steps.
std::string random_output(const std::shared_ptr<const OutputGrammar>& g, std::mt19937_64& rng) {
  OutputMatcher m(g);
  std::string out;
  for (int step = 0; step < 800; ++step) {
    if (m.may_end() && (m.must_end() || rng() % 3 == 0)) return out;
    std::vector<char> options;
    for (int c = 0x0A; c < 0x7F; ++c) {
      if (c > 0x0A && c < 0x20) continue;
      OutputMatcher trial = m;
      if (!trial.feed_byte(static_cast<uint8_t>(c))) continue;
      const int weight = (c == '"' || c == '}' || c == ']' || c == '<' || c == '/') ? 8 : 1;
      options.insert(options.end(), weight, static_cast<char>(c));
    }
    EXPECT_FALSE(options.empty()) << out;
    if (options.empty()) return "";
    const char c = options[rng() % options.size()];
    m.feed_byte(static_cast<uint8_t>(c));
    out += c;
  }
  return "";
}

const json& tools() {
  static const json t = json::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
          "properties": {"city": {"enum": ["Oslo", "Lima"]}, "days": {"type": "integer"}},
          "required": ["city"], "additionalProperties": false}}},
      {"type": "function", "function": {"name": "now"}}])");
  return t;
}

void expect_valid_call(const ParsedToolCall& call, const std::string& text) {
  const json args = json::parse(call.arguments, nullptr, false);
  ASSERT_TRUE(args.is_object()) << text;
  if (call.name == "get_weather") {
    EXPECT_TRUE(args["city"] == "Oslo" || args["city"] == "Lima") << text;
    if (args.contains("days")) {
      EXPECT_TRUE(args["days"].is_number_integer()) << text;
    }
    for (const auto& [k, v] : args.items()) EXPECT_TRUE(k == "city" || k == "days") << text;
  } else {
    EXPECT_EQ(call.name, "now") << text;
  }
}

TEST(OutputConstraint, ForcedCallsParseBackInTheirSyntax) {
  std::mt19937_64 rng(5);
  for (ToolCallSyntax syntax : {ToolCallSyntax::Hermes, ToolCallSyntax::Llama3}) {
    for (bool parallel : {false, true}) {
      auto made =
          tool_call_grammar(syntax, tools(), ToolChoice{ToolChoice::Mode::Required, ""}, parallel);
      ASSERT_TRUE(std::holds_alternative<std::shared_ptr<const OutputGrammar>>(made));
      const auto& g = std::get<std::shared_ptr<const OutputGrammar>>(made);
      int parsed = 0;
      for (int walk = 0; walk < 25; ++walk) {
        const std::string text = random_output(g, rng);
        if (text.empty()) continue;
        const ParsedReply reply = parse_tool_calls(syntax, text);
        ASSERT_FALSE(reply.calls.empty()) << text;
        if (!parallel) {
          EXPECT_EQ(reply.calls.size(), 1u) << text;
        }
        EXPECT_EQ(reply.content, "") << text;
        for (const ParsedToolCall& call : reply.calls) expect_valid_call(call, text);
        ++parsed;
      }
      EXPECT_GT(parsed, 10);
    }
  }
  // A named function: that one only.
  auto named = tool_call_grammar(ToolCallSyntax::Hermes, tools(),
                                 ToolChoice{ToolChoice::Mode::Named, "now"}, true);
  const auto& g = std::get<std::shared_ptr<const OutputGrammar>>(named);
  for (int walk = 0; walk < 10; ++walk) {
    const std::string text = random_output(g, rng);
    if (text.empty()) continue;
    const ParsedReply reply = parse_tool_calls(ToolCallSyntax::Hermes, text);
    ASSERT_EQ(reply.calls.size(), 1u) << text;
    EXPECT_EQ(reply.calls[0].name, "now");
  }
}

TEST(OutputConstraint, RefusalsNameTheirField) {
  const ToolChoice required{ToolChoice::Mode::Required, ""};
  for (ToolCallSyntax s :
       {ToolCallSyntax::QwenXml, ToolCallSyntax::MistralJson, ToolCallSyntax::MistralArgs}) {
    auto made = tool_call_grammar(s, tools(), required, true);
    ASSERT_TRUE(std::holds_alternative<ApiError>(made));
    EXPECT_EQ(std::get<ApiError>(made).param, "tool_choice");
  }
  auto unknown = tool_call_grammar(ToolCallSyntax::Hermes, tools(),
                                   ToolChoice{ToolChoice::Mode::Named, "x"}, true);
  ASSERT_TRUE(std::holds_alternative<ApiError>(unknown));
  EXPECT_EQ(std::get<ApiError>(unknown).param, "tool_choice");
  json bad = tools();
  bad[0]["function"]["parameters"]["properties"]["city"]["format"] = "city";
  auto keyword = tool_call_grammar(ToolCallSyntax::Hermes, bad, required, true);
  ASSERT_TRUE(std::holds_alternative<ApiError>(keyword));
  EXPECT_EQ(std::get<ApiError>(keyword).param, "tools[0].function.parameters");
  EXPECT_NE(std::get<ApiError>(keyword).message.find("format"), std::string::npos);
  OutputFormat format;
  format.schema = json{{"type", "integer"}, {"multipleOf", 2}};
  auto refused = output_format_grammar(format, "text.format");
  ASSERT_TRUE(std::holds_alternative<ApiError>(refused));
  EXPECT_EQ(std::get<ApiError>(refused).param, "text.format.schema");
}

}  // namespace
}  // namespace tangram::server
