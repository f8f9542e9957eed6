// Response bodies and SSE framing, in the shape OpenAI's API sends.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/logprobs_json.h"
#include "server/openai_response.h"
#include "server/stream_formats.h"

#include <cmath>

namespace tangram::server {
namespace {

ResponseMeta meta() { return ResponseMeta{"chatcmpl-1", 1700000000, "m", "conv-1"}; }

// The result of a generation that ended with `text`.
RequestResult ended(FinishReason finish, std::string text) {
  RequestResult r;
  r.finish = finish;
  r.text = std::move(text);
  return r;
}

TEST(OpenAiResponse, ChatCompletionShape) {
  const auto j = chat_completion_json(meta(), "hello", FinishReason::Length, Usage{10, 3, 4});
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "hello");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["total_tokens"], 13);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
  EXPECT_EQ(j["session_id"], "conv-1");
}

TEST(OpenAiResponse, StreamChunksFollowOpenAiOrder) {
  const auto first = chat_chunk_json(meta(), "assistant", "", std::nullopt, true);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(first.contains("usage") && first["usage"].is_null());
  const auto last = chat_chunk_json(meta(), std::nullopt, std::nullopt, FinishReason::Stop, false);
  EXPECT_TRUE(last["choices"][0]["delta"].empty());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(last.contains("usage"));
  const auto usage = chat_usage_chunk_json(meta(), Usage{5, 2, 0});
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 2);
}

TEST(OpenAiResponse, ToolCallsMessage) {
  ParsedReply reply;
  reply.calls.push_back(ParsedToolCall{"get_weather", R"({"city":"Oslo"})", ""});
  reply.calls.push_back(ParsedToolCall{"now", "{}", "model-id-1"});
  const auto j = chat_tool_calls_json(meta(), reply, Usage{10, 3, 0});
  const auto& m = j["choices"][0]["message"];
  EXPECT_TRUE(m["content"].is_null());
  ASSERT_EQ(m["tool_calls"].size(), 2u);
  EXPECT_EQ(m["tool_calls"][0]["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(m["tool_calls"][0]["type"], "function");
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], R"({"city":"Oslo"})");
  EXPECT_EQ(m["tool_calls"][1]["id"], "model-id-1");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
}

// The data payloads of SSE text, parsed (without [DONE]).
std::vector<nlohmann::json> chunks_of(const std::string& sse) {
  std::vector<nlohmann::json> out;
  for (size_t pos = 0; pos < sse.size();) {
    const size_t end = sse.find("\n\n", pos);
    const std::string payload = sse.substr(pos + 6, end - pos - 6);
    if (payload != "[DONE]") out.push_back(nlohmann::json::parse(payload));
    pos = end + 2;
  }
  return out;
}

std::string streamed_content(const std::vector<nlohmann::json>& chunks) {
  std::string text;
  for (const auto& c : chunks)
    if (!c["choices"].empty() && c["choices"][0]["delta"].contains("content"))
      text += c["choices"][0]["delta"]["content"].get<std::string>();
  return text;
}

TEST(OpenAiResponse, StreamHoldsBackACallAndSendsItAsItIsGenerated) {
  auto stream = chat_stream(meta(), /*include_usage=*/false, ToolCallSyntax::Hermes);
  std::string sse = stream->text("Let me check. <tool");
  sse += stream->text("_call>{\"name\": \"f\", ");
  EXPECT_EQ(streamed_content(chunks_of(sse)), "Let me check. ");  // the call's text is held back
  // The name is whole: the call opens with its id and name, before its arguments exist.
  auto chunks = chunks_of(sse);
  const auto& opened = chunks.back()["choices"][0]["delta"]["tool_calls"];
  ASSERT_EQ(opened.size(), 1u);
  EXPECT_EQ(opened[0]["index"], 0);
  EXPECT_EQ(opened[0]["type"], "function");
  EXPECT_EQ(opened[0]["function"]["name"], "f");
  EXPECT_EQ(opened[0]["function"]["arguments"], "");
  EXPECT_EQ(opened[0]["id"].get<std::string>().rfind("call_", 0), 0u);
  sse += stream->text("\"arguments\": {\"a\": ");
  chunks = chunks_of(sse);
  const auto& piece = chunks.back()["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_FALSE(piece.contains("id"));
  EXPECT_FALSE(piece["function"].contains("name"));
  EXPECT_EQ(piece["function"]["arguments"], "{\"a\":");
  const std::string full =
      "Let me check. <tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>";
  sse += stream->text("1}}</tool_call>");
  sse += stream->closing(ended(FinishReason::Stop, full), Usage{});
  chunks = chunks_of(sse);
  EXPECT_EQ(streamed_content(chunks), "Let me check. ");
  EXPECT_EQ(
      chunks[chunks.size() - 2]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"],
      "1}");
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "tool_calls");
}

// A call already streamed whose reply then does not parse as calls (a Mistral marker left
// without its [ARGS]): what went out stays out; the held text follows as content and the reply
// ends as "stop", as the non-streamed answer (which holds no call) does.
TEST(OpenAiResponse, AStreamedCallInAReplyThatEndsMalformedIsFollowedByTheContent) {
  const std::string text = "[TOOL_CALLS]now[ARGS]{}[TOOL_CALLS]bad";
  ASSERT_TRUE(parse_tool_calls(ToolCallSyntax::MistralArgs, text).calls.empty());
  auto stream = chat_stream(meta(), false, ToolCallSyntax::MistralArgs);
  std::string sse = stream->text(text);
  sse += stream->closing(ended(FinishReason::Stop, text), Usage{});
  const auto chunks = chunks_of(sse);
  EXPECT_EQ(streamed_content(chunks), text);
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "stop");
}

// However the reply is cut into deltas (here at every byte position), the stream sends the same
// content and calls as the whole reply parsed at once: text before a call, or all of it when no
// call parses.
TEST(OpenAiResponse, StreamSendsTheSameAtEverySplitOfTheReply) {
  for (const auto& [syntax, text] : std::vector<std::pair<ToolCallSyntax, std::string>>{
           {ToolCallSyntax::Hermes,
            "Let me check. <tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>"},
           {ToolCallSyntax::Hermes, "a <tools are fine <tool_call>{broken"},
           {ToolCallSyntax::QwenXml,
            "x <tool_call><function=f><parameter=q>1</parameter></function></tool_call>"},
           {ToolCallSyntax::Llama3,
            " <|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", "
            "\"parameters\": {}}"},
           {ToolCallSyntax::Llama3, "Use {name} here."},
           {ToolCallSyntax::MistralJson, "ok [TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]"},
           {ToolCallSyntax::MistralArgs,
            "[TOOL_CALLS]now[ARGS]{\"a\": [1, 2]}[TOOL_CALLS]x[ARGS]{}"},
           {ToolCallSyntax::MistralArgs, "ok [TOOL_CALLS]bad"}}) {
    SCOPED_TRACE(text);
    const ParsedReply whole = parse_tool_calls(syntax, text);
    const std::string content =
        whole.calls.empty() ? text
                            : text.substr(0, tool_call_start(syntax, text).value_or(text.size()));
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      auto stream = chat_stream(meta(), /*include_usage=*/false, syntax);
      std::string sse = stream->text(std::string_view(text).substr(0, cut));
      sse += stream->text(std::string_view(text).substr(cut));
      sse += stream->closing(ended(FinishReason::Stop, text), Usage{});
      const auto chunks = chunks_of(sse);
      ASSERT_EQ(streamed_content(chunks), content) << "cut at " << cut;
      // A call's first piece names it; its pieces join into its arguments.
      std::vector<std::string> names, arguments;
      for (const auto& c : chunks)
        if (!c["choices"].empty() && c["choices"][0]["delta"].contains("tool_calls"))
          for (const auto& call : c["choices"][0]["delta"]["tool_calls"]) {
            const size_t index = call["index"];
            if (call["function"].contains("name")) {
              ASSERT_EQ(index, names.size());
              names.push_back(call["function"]["name"]);
              arguments.emplace_back();
            }
            ASSERT_LT(index, arguments.size());
            arguments[index] += call["function"]["arguments"].get<std::string>();
          }
      ASSERT_EQ(names.size(), whole.calls.size()) << "cut at " << cut;
      for (size_t i = 0; i < names.size(); ++i) {
        EXPECT_EQ(names[i], whole.calls[i].name);
        EXPECT_EQ(nlohmann::json::parse(arguments[i]),
                  nlohmann::json::parse(whole.calls[i].arguments));
      }
    }
  }
}

TEST(OpenAiResponse, StreamReleasesHeldTextThatIsNoCall) {
  auto stream = chat_stream(meta(), false, ToolCallSyntax::Hermes);
  std::string sse = stream->text("a <tool");
  EXPECT_EQ(streamed_content(chunks_of(sse)), "a ");
  sse += stream->text("s are fine");  // "<tools" is not "<tool_call>": out it goes
  EXPECT_EQ(streamed_content(chunks_of(sse)), "a <tools are fine");
  sse += stream->text(" <tool_call>{broken");
  sse +=
      stream->closing(ended(FinishReason::Length, "a <tools are fine <tool_call>{broken"), Usage{});
  const auto chunks = chunks_of(sse);
  EXPECT_EQ(streamed_content(chunks),
            "a <tools are fine <tool_call>{broken");  // no call: all of it is content
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "length");
}

// The typed events of a Responses stream, parsed.
std::vector<nlohmann::json> response_events_of(const std::string& sse) {
  std::vector<nlohmann::json> out;
  for (size_t pos = 0; pos < sse.size();) {
    const size_t end = sse.find("\n\n", pos);
    const size_t data = sse.find("data: ", pos);
    out.push_back(nlohmann::json::parse(sse.substr(data + 6, end - data - 6)));
    pos = end + 2;
  }
  return out;
}

TEST(OpenAiResponse, ResponsesStreamSendsCallsAsFunctionCallItems) {
  ResponseState initial;
  initial.id = "resp_1";
  initial.message_id = "msg_1";
  auto stream = responses_stream(initial, ToolCallSyntax::Hermes);
  std::string sse = stream->opening();
  const std::string full = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>";
  sse += stream->text("<tool_call>{\"name\": \"f\", ");
  sse += stream->text("\"arguments\": {\"a\": 1}}</tool_call>");
  sse += stream->closing(ended(FinishReason::Stop, full), Usage{5, 9, 0});
  const auto events = response_events_of(sse);
  std::vector<std::string> types;
  for (const auto& e : events) types.push_back(e["type"]);
  EXPECT_EQ(types,
            (std::vector<std::string>{
                "response.created", "response.in_progress", "response.output_item.added",
                "response.function_call_arguments.delta", "response.function_call_arguments.done",
                "response.output_item.done", "response.completed"}));
  const auto& item = events[5]["item"];
  EXPECT_EQ(item["type"], "function_call");
  EXPECT_EQ(item["name"], "f");
  EXPECT_EQ(nlohmann::json::parse(item["arguments"].get<std::string>())["a"], 1);
  const auto& output = events.back()["response"]["output"];
  ASSERT_EQ(output.size(), 1u);  // no text: no message item
  EXPECT_EQ(output[0]["call_id"], item["call_id"]);
  // The same reply, not streamed, gives the same output.
  ResponseState s = initial;
  finish_response(s, FinishReason::Stop, full, Usage{5, 9, 0}, ToolCallSyntax::Hermes);
  const auto body = response_json(s);
  ASSERT_EQ(body["output"].size(), 1u);
  EXPECT_EQ(body["output"][0]["type"], "function_call");
  EXPECT_EQ(body["output"][0]["arguments"], item["arguments"]);
}

TEST(OpenAiResponse, LogprobsInBothShapes) {
  const PieceOf piece = [](int32_t id) {
    std::string text = id == 7 ? "\xe2\x96" : "t";  // 7: a piece that is part of a character
    if (id != 7) text.append(std::to_string(id));
    return text;
  };
  const std::vector<TokenLogprob> lps = {TokenLogprob{3, -0.5f, {{3, -0.5f}, {7, -1.5f}}},
                                         TokenLogprob{7, -INFINITY, {}}};
  const auto chat = chat_logprobs_json(lps, piece);
  ASSERT_EQ(chat["content"].size(), 2u);
  EXPECT_EQ(chat["content"][0]["token"], "t3");
  EXPECT_FLOAT_EQ(chat["content"][0]["logprob"].get<float>(), -0.5f);
  EXPECT_EQ(chat["content"][0]["top_logprobs"][1]["bytes"], (nlohmann::ordered_json{0xe2, 0x96}));
  EXPECT_EQ(chat["content"][1]["logprob"], -9999.0);  // probability zero, as OpenAI writes it
  EXPECT_TRUE(chat["refusal"].is_null());
  const auto legacy = completion_logprobs_json(lps, piece, 10);
  EXPECT_EQ(legacy["tokens"][0], "t3");
  EXPECT_EQ(legacy["text_offset"], (nlohmann::ordered_json{10, 12}));
  EXPECT_FLOAT_EQ(legacy["top_logprobs"][0]["t3"].get<float>(), -0.5f);
  const auto j = chat_completion_json(meta(), "x", FinishReason::Stop, Usage{}, chat);
  EXPECT_EQ(j["choices"][0]["logprobs"]["content"].size(), 2u);
}

TEST(OpenAiResponse, SseFramingAndInvalidUtf8) {
  const std::string e = sse_event(
      chat_chunk_json(meta(), std::nullopt, std::string_view("a\xff"), std::nullopt, false));
  EXPECT_EQ(e.rfind("data: {", 0), 0u);
  EXPECT_EQ(e.substr(e.size() - 2), "\n\n");
  EXPECT_EQ(e.find('\n'), e.size() - 2);  // one line: JSON never carries a raw newline
  EXPECT_NE(e.find("a\xef\xbf\xbd"), std::string::npos);  // U+FFFD in place of the bad byte
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

TEST(OpenAiResponse, ErrorObject) {
  const auto j = error_json(bad_request("bad", "temperature", "out_of_range"));
  EXPECT_EQ(j["error"]["message"], "bad");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_EQ(j["error"]["code"], "out_of_range");
  const auto none = error_json(ApiError{500, "x", "server_error", "", "", 0});
  EXPECT_TRUE(none["error"]["param"].is_null());
  EXPECT_TRUE(none["error"]["code"].is_null());
}

TEST(OpenAiResponse, RandomIdsDiffer) {
  const std::string a = random_id("chatcmpl-"), b = random_id("chatcmpl-");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.size(), 9u + 24u);
}

}  // namespace
}  // namespace tangram::server
