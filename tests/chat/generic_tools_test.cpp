// The server's own tool syntax for templates without one: the prompt names every tool, earlier
// calls and results are written as text a plain template renders, and a reply in the taught form
// parses back as calls (Hermes).
#include "chat/generic_tools.h"

#include <gtest/gtest.h>

#include "chat/tool_calls.h"

namespace tangram {
namespace {

ChatMessage msg(const std::string& role, const std::string& content) {
  ChatMessage m;
  m.role = role;
  m.content = content;
  return m;
}

const nlohmann::json kTools = nlohmann::json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "The weather",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
  {"type": "function", "function": {"name": "get_time"}}])");

TEST(GenericTools, ThePromptNamesEveryToolAndTheCallForm) {
  const std::string p = generic_tool_prompt(kTools);
  EXPECT_NE(p.find("\"get_weather\""), std::string::npos);
  EXPECT_NE(p.find("\"get_time\""), std::string::npos);
  EXPECT_NE(p.find("<tool_call>"), std::string::npos);
  EXPECT_NE(p.find("<tool_response>"), std::string::npos);
}

TEST(GenericTools, ThePromptJoinsTheSystemMessageOrComesFirst) {
  auto with_system = with_generic_tools({msg("system", "Be brief."), msg("user", "q")}, kTools);
  ASSERT_EQ(with_system.size(), 2u);
  EXPECT_EQ(with_system[0].content.rfind("Be brief.\n\n", 0), 0u);
  EXPECT_NE(with_system[0].content.find("get_weather"), std::string::npos);
  auto without = with_generic_tools({msg("user", "q")}, kTools);
  ASSERT_EQ(without.size(), 2u);
  EXPECT_EQ(without[0].role, "system");
  EXPECT_EQ(without[1].content, "q");
}

TEST(GenericTools, CallsAndResultsBecomeTextAPlainTemplateRenders) {
  ChatMessage call = msg("assistant", "Checking.");
  call.tool_calls = nlohmann::ordered_json::parse(
      R"([{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}},
          {"id": "c2", "type": "function", "function": {"name": "get_time", "arguments": {}}}])");
  ChatMessage r1 = msg("tool", "sunny");
  r1.tool_call_id = "c1";
  ChatMessage r2 = msg("tool", "noon");
  r2.tool_call_id = "c2";
  const auto out =
      with_generic_tools({msg("user", "weather?"), call, r1, r2, msg("user", "thanks")}, kTools);
  ASSERT_EQ(out.size(), 5u);  // system, user, assistant, one user turn of results, user
  EXPECT_EQ(out[2].role, "assistant");
  EXPECT_FALSE(out[2].tool_calls.has_value());
  // The assistant's text parses back as its calls, as the model's own reply would.
  const ParsedReply parsed = parse_tool_calls(ToolCallSyntax::Hermes, out[2].content);
  EXPECT_EQ(parsed.content, "Checking.");
  ASSERT_EQ(parsed.calls.size(), 2u);
  EXPECT_EQ(parsed.calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(parsed.calls[0].arguments), nlohmann::json({{"city", "Oslo"}}));
  EXPECT_EQ(parsed.calls[1].name, "get_time");
  EXPECT_EQ(out[3].role, "user");
  EXPECT_EQ(out[3].content,
            "<tool_response>\nsunny\n</tool_response>\n<tool_response>\nnoon\n</tool_response>");
  EXPECT_EQ(out[4].content, "thanks");
}

TEST(GenericTools, TheBuiltinTemplatesRenderTheResult) {
  ChatMessage call = msg("assistant", "");
  call.tool_calls = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "get_time", "arguments": {}}}])");
  const auto messages =
      with_generic_tools({msg("user", "time?"), call, msg("tool", "noon")}, kTools);
  for (const char* name : {"chatml", "llama3", "llama2"}) {
    SCOPED_TRACE(name);
    auto t = ChatTemplate::builtin(name);
    ASSERT_TRUE(t.ok());
    auto text = t->render(messages, true, "<s>", "</s>");
    ASSERT_TRUE(text.ok()) << text.message();
    EXPECT_NE(text->find("<tool_response>\nnoon"), std::string::npos);
    EXPECT_NE(text->find("\"get_time\""), std::string::npos);
  }
}

}  // namespace
}  // namespace tangram
