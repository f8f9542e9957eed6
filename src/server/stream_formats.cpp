#include "server/stream_formats.h"

namespace tangram::server {
namespace {

using nlohmann::ordered_json;

std::string error_event(const ApiError& e) {
  std::string out = sse_event(ordered_json(error_json(e)));
  out.append(kSseDone);
  return out;
}

class ChatStream final : public StreamFormat {
 public:
  ChatStream(const ResponseMeta& m, bool include_usage, ToolCallSyntax tools)
      : m_(m), usage_(include_usage), tools_(tools) {}
  std::string opening() override { return sse_event(chat_chunk_json(m_, "assistant", "", std::nullopt, usage_)); }
  std::string text(std::string_view delta) override {
    if (tools_ == ToolCallSyntax::None) return content(delta);
    text_.append(delta);
    // Everything before where a call may start goes out now; the rest waits for the end.
    const size_t until = tool_call_start(tools_, text_).value_or(text_.size());
    if (until <= sent_) return {};
    const std::string out = content(std::string_view(text_).substr(sent_, until - sent_));
    sent_ = until;
    return out;
  }
  std::string closing(FinishReason finish, const std::string& full_text, const Usage& u) override {
    std::string out;
    const ParsedReply reply = tools_ == ToolCallSyntax::None ? ParsedReply{} : parse_tool_calls(tools_, full_text);
    if (!reply.calls.empty()) {
      out = chat_tool_calls_chunks(m_, reply, usage_);
    } else {
      if (sent_ < text_.size()) out = content(std::string_view(text_).substr(sent_));
      out += sse_event(chat_chunk_json(m_, std::nullopt, std::nullopt, finish, usage_));
    }
    if (usage_) out += sse_event(chat_usage_chunk_json(m_, u));
    out.append(kSseDone);
    return out;
  }
  std::string failure(const ApiError& e) override { return error_event(e); }

 private:
  std::string content(std::string_view delta) const {
    return sse_event(chat_chunk_json(m_, std::nullopt, delta, std::nullopt, usage_));
  }
  ResponseMeta m_;
  bool usage_;
  ToolCallSyntax tools_;
  std::string text_;  // with tools: the reply so far
  size_t sent_ = 0;   // with tools: how much of it went out as content
};

class CompletionStream final : public StreamFormat {
 public:
  CompletionStream(const ResponseMeta& m, std::string echo, bool include_usage)
      : m_(m), echo_(std::move(echo)), usage_(include_usage) {}
  std::string opening() override {
    return echo_.empty() ? std::string() : sse_event(completion_chunk_json(m_, echo_, std::nullopt, usage_));
  }
  std::string text(std::string_view delta) override {
    return sse_event(completion_chunk_json(m_, delta, std::nullopt, usage_));
  }
  std::string closing(FinishReason finish, const std::string&, const Usage& u) override {
    std::string out = sse_event(completion_chunk_json(m_, "", finish, usage_));
    if (usage_) out += sse_event(completion_usage_chunk_json(m_, u));
    out.append(kSseDone);
    return out;
  }
  std::string failure(const ApiError& e) override { return error_event(e); }

 private:
  ResponseMeta m_;
  std::string echo_;
  bool usage_;
};

class ResponsesStream final : public StreamFormat {
 public:
  explicit ResponsesStream(const ResponseState& initial) : state_(initial), events_(initial) {}
  std::string opening() override { return events_.opening(); }
  std::string text(std::string_view delta) override { return events_.text_delta(delta); }
  std::string closing(FinishReason finish, const std::string& full_text, const Usage& u) override {
    finish_response(state_, finish, full_text, u);
    return events_.closing(state_);
  }
  std::string failure(const ApiError& e) override {
    fail_response(state_, e);
    return events_.closing(state_);
  }

 private:
  ResponseState state_;
  ResponseEvents events_;
};

}  // namespace

std::unique_ptr<StreamFormat> chat_stream(const ResponseMeta& meta, bool include_usage, ToolCallSyntax tools) {
  return std::make_unique<ChatStream>(meta, include_usage, tools);
}

std::unique_ptr<StreamFormat> completion_stream(const ResponseMeta& meta, std::string echo_prefix,
                                                bool include_usage) {
  return std::make_unique<CompletionStream>(meta, std::move(echo_prefix), include_usage);
}

std::unique_ptr<StreamFormat> responses_stream(const ResponseState& initial) {
  return std::make_unique<ResponsesStream>(initial);
}

}  // namespace tangram::server
