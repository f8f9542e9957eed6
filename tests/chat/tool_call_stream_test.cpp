// Tool calls streamed as generated: for replies in every syntax, cut into pieces of every size,
// the announced names and the joined argument pieces equal what parse_tool_calls() finds in the
// whole reply (as JSON values: the stream drops whitespace outside strings, the parser re-dumps),
// and replies that are content announce nothing.
#include "chat/tool_call_stream.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tangram {
namespace {

struct Joined {
  std::vector<std::string> names;
  std::vector<std::string> arguments;
};

// Feeds `reply` in pieces of `piece` bytes; checks the deltas' shape on the way.
Joined stream(ToolCallSyntax syntax, std::string_view reply, size_t piece) {
  ToolCallStreamer s(syntax);
  Joined j;
  for (size_t at = 0; at < reply.size(); at += piece) {
    for (const ToolCallDelta& d : s.append(reply.substr(at, piece))) {
      if (d.opens) {
        EXPECT_EQ(d.index, static_cast<int>(j.names.size())) << "calls open in order";
        EXPECT_FALSE(d.name.empty());
        j.names.push_back(d.name);
        j.arguments.emplace_back();
      } else {
        EXPECT_LT(d.index, static_cast<int>(j.names.size())) << "a piece of an unopened call";
        EXPECT_FALSE(d.arguments.empty()) << "empty pieces are not sent";
      }
      if (d.index < static_cast<int>(j.arguments.size()))
        j.arguments[static_cast<size_t>(d.index)] += d.arguments;
    }
  }
  EXPECT_EQ(s.calls(), static_cast<int>(j.names.size()));
  for (int i = 0; i < s.calls(); ++i)
    EXPECT_EQ(s.arguments(i), j.arguments[static_cast<size_t>(i)]);
  return j;
}

struct Case {
  ToolCallSyntax syntax;
  std::string reply;
};

const Case kCalls[] = {
    {ToolCallSyntax::Hermes,
     "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris, "
     "FR\", \"days\": 3, \"units\": [\"C\", \"mm\"], \"detail\": {\"wind\": true, \"note\": "
     "\"a \\\"quoted\\\" {brace}\"}}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
     "\"arguments\": {}}\n</tool_call>"},
    {ToolCallSyntax::Hermes,  // arguments before the name; numbers and null at the top
     "<tool_call>{\"arguments\": {\"n\": -12.5e3, \"z\": null}, \"name\": \"calc\"}</tool_call>"},
    {ToolCallSyntax::Llama3,
     "<|python_tag|>{\"name\": \"search\", \"parameters\": {\"query\": \"tangram\"}}; {\"name\": "
     "\"open\", \"parameters\": {\"id\": 7}}"},
    {ToolCallSyntax::Llama3, "  {\"name\": \"ping\", \"parameters\": {\"host\": \"a\\\\b\"}}"},
    {ToolCallSyntax::MistralJson,
     "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}, \"id\": "
     "\"abc123def\"}, "
     "{\"name\": \"mul\", \"arguments\": {\"a\": 3}}]"},
    {ToolCallSyntax::MistralArgs,
     "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\", \"list\": [1, {\"x\": \"]\"}]}"
     "[TOOL_CALLS]noop[ARGS]{}"},
};

TEST(ToolCallStreamer, PiecesJoinIntoTheParsedCallsWhateverTheCuts) {
  for (const Case& c : kCalls) {
    const ParsedReply parsed = parse_tool_calls(c.syntax, c.reply);
    ASSERT_FALSE(parsed.calls.empty()) << c.reply;
    for (size_t piece = 1; piece <= c.reply.size(); ++piece) {
      const Joined j = stream(c.syntax, c.reply, piece);
      ASSERT_EQ(j.names.size(), parsed.calls.size()) << c.reply << " in pieces of " << piece;
      for (size_t i = 0; i < j.names.size(); ++i) {
        EXPECT_EQ(j.names[i], parsed.calls[i].name);
        const auto streamed = nlohmann::json::parse(j.arguments[i], nullptr, false);
        ASSERT_FALSE(streamed.is_discarded()) << j.arguments[i];
        EXPECT_EQ(streamed, nlohmann::json::parse(parsed.calls[i].arguments))
            << c.reply << " in pieces of " << piece;
        EXPECT_EQ(j.arguments[i].find_first_of("\n\t"), std::string::npos);
      }
    }
  }
}

TEST(ToolCallStreamer, ArgumentsGoOutBeforeTheCallEnds) {
  ToolCallStreamer s(ToolCallSyntax::Hermes);
  EXPECT_TRUE(s.append("<tool_call>\n{\"name\": \"get_wea").empty());
  auto d = s.append("ther\", \"arguments\": {\"ci");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(d[0].opens);
  EXPECT_EQ(d[0].name, "get_weather");
  EXPECT_EQ(d[0].arguments, "{\"ci");
  d = s.append("ty\": \"Par");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_FALSE(d[0].opens);
  EXPECT_EQ(d[0].arguments, "ty\":\"Par");
  EXPECT_FALSE(s.arguments_complete(0));
  d = s.append("is\"}}\n</tool_call>");
  EXPECT_TRUE(s.arguments_complete(0));
  EXPECT_EQ(s.arguments(0), "{\"city\":\"Paris\"}");
}

TEST(ToolCallStreamer, ContentAndUnstreamableFormsAnnounceNothingOrOnlyTheName) {
  const Case content[] = {
      {ToolCallSyntax::Hermes, "No tools needed: the answer is 4."},
      {ToolCallSyntax::Llama3, "Sure, {\"name\": \"x\"} is JSON."},  // not at the start
      {ToolCallSyntax::MistralJson, "[TOOL_CALLS] oops"},
      {ToolCallSyntax::QwenXml,
       "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>"},
      {ToolCallSyntax::None, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"},
  };
  for (const Case& c : content)
    for (size_t piece : {size_t{1}, size_t{5}, c.reply.size()})
      EXPECT_TRUE(stream(c.syntax, c.reply, piece).names.empty()) << c.reply;
  // Arguments written as a JSON string are typed at the end: the call opens with none.
  const Joined j =
      stream(ToolCallSyntax::Hermes,
             "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>", 3);
  ASSERT_EQ(j.names.size(), 1u);
  EXPECT_EQ(j.arguments[0], "");
}

}  // namespace
}  // namespace tangram
