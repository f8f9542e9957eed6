// What one streamed generation writes, per endpoint: the opening events, one event per piece of
// text, and the closing (or failure) events. The server's streaming loop is the same for all.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "chat/tool_calls.h"
#include "scheduler/request.h"
#include "server/anthropic_response.h"
#include "server/api_error.h"
#include "server/logprobs_json.h"
#include "server/ollama_response.h"
#include "server/openai_response.h"
#include "server/responses_json.h"

namespace tangram::server {

class StreamFormat {
 public:
  virtual ~StreamFormat() = default;
  virtual std::string opening() = 0;
  // A piece of text and the log-probabilities of the tokens that made it (empty unless asked).
  virtual std::string text(std::string_view delta, std::span<const TokenLogprob> logprobs = {}) = 0;
  // The end of a generation that finished (stop or length): its result (finish, text, the stop
  // string that ended it) and the request's usage.
  virtual std::string closing(const RequestResult& result, const Usage& usage) = 0;
  virtual std::string failure(const ApiError& error) = 0;
};

// chat.completion.chunk events; with include_usage a last chunk with the usage; then [DONE].
// With a tool-call syntax (tools were given), text that may begin a call is held back until the
// reply ends: then it goes out as tool_calls deltas if it parses as calls, as content otherwise.
// piece: a token's text, given when logprobs were asked for (null otherwise).
std::unique_ptr<StreamFormat> chat_stream(const ResponseMeta& meta, bool include_usage,
                                          ToolCallSyntax tools = ToolCallSyntax::None,
                                          PieceOf piece = {});
// text_completion events, the echoed prompt first when there is one; then [DONE].
std::unique_ptr<StreamFormat> completion_stream(const ResponseMeta& meta, std::string echo_prefix,
                                                bool include_usage, PieceOf piece = {});
// The Responses API's typed events (responses_json.h); with tools, calls held back as in chat.
// piece: given when logprobs were asked for (output_text.delta events and the part carry them).
std::unique_ptr<StreamFormat> responses_stream(const ResponseState& initial,
                                               ToolCallSyntax tools = ToolCallSyntax::None,
                                               PieceOf piece = {});

// Anthropic's Messages events (anthropic_response.h); with tools, calls held back as in chat and
// sent as tool_use blocks. stop_sequences: the request's, to name the one that ended it.
std::unique_ptr<StreamFormat> messages_stream(const MessageMeta& meta,
                                              std::vector<std::string> stop_sequences,
                                              ToolCallSyntax tools = ToolCallSyntax::None);

// Ollama's NDJSON lines (ollama_response.h); with tools (chat), calls held back as in chat and
// sent as message.tool_calls.
std::unique_ptr<StreamFormat> ollama_stream(OllamaMeta meta,
                                            ToolCallSyntax tools = ToolCallSyntax::None);

}  // namespace tangram::server
