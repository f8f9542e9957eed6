#include "server/stream_formats.h"

namespace tangram::server {
namespace {

using nlohmann::ordered_json;

std::string error_event(const ApiError& e) {
  std::string out = sse_event(ordered_json(error_json(e)));
  out.append(kSseDone);
  return out;
}

// With a tool-call syntax, the part of a growing reply that is surely content: text from where a
// call may start is held back until the reply ends (or until it turns out to be no call).
class HoldBack {
 public:
  explicit HoldBack(ToolCallSyntax tools) : tools_(tools), start_(tools) {}
  // The text that can go out now, after `delta` arrived.
  std::string take(std::string_view delta) {
    if (tools_ == ToolCallSyntax::None) return std::string(delta);
    text_.append(delta);
    const size_t until = start_.append(delta).value_or(text_.size());
    if (until <= sent_) return {};
    std::string out = text_.substr(sent_, until - sent_);
    sent_ = until;
    return out;
  }
  // What is still held back (at the end of a reply that made no call).
  std::string rest() {
    std::string out = sent_ < text_.size() ? text_.substr(sent_) : std::string();
    sent_ = text_.size();
    return out;
  }

 private:
  ToolCallSyntax tools_;
  ToolCallStartScanner start_;  // where a call may start, scanning each delta once
  std::string text_;            // the reply so far
  size_t sent_ = 0;             // how much of it went out
};

class ChatStream final : public StreamFormat {
 public:
  ChatStream(const ResponseMeta& m, bool include_usage, ToolCallSyntax tools, PieceOf piece)
      : m_(m), usage_(include_usage), tools_(tools), held_(tools), piece_(std::move(piece)) {}
  std::string opening() override {
    return sse_event(chat_chunk_json(m_, "assistant", "", std::nullopt, usage_));
  }
  std::string text(std::string_view delta, std::span<const TokenLogprob> logprobs) override {
    const std::string out = held_.take(delta);
    const nlohmann::ordered_json lp = piece_ && !logprobs.empty()
                                          ? chat_logprobs_json(logprobs, piece_)
                                          : nlohmann::ordered_json(nullptr);
    if (out.empty() && lp.is_null()) return {};
    return sse_event(chat_chunk_json(m_, std::nullopt, out, std::nullopt, usage_, lp));
  }
  std::string closing(FinishReason finish, const std::string& full_text, const Usage& u) override {
    std::string out;
    const ParsedReply reply =
        tools_ == ToolCallSyntax::None ? ParsedReply{} : parse_tool_calls(tools_, full_text);
    if (!reply.calls.empty()) {
      out = chat_tool_calls_chunks(m_, reply, usage_);
    } else {
      if (const std::string rest = held_.rest(); !rest.empty()) out = content(rest);
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
  HoldBack held_;
  PieceOf piece_;
};

class CompletionStream final : public StreamFormat {
 public:
  CompletionStream(const ResponseMeta& m, std::string echo, bool include_usage, PieceOf piece)
      : m_(m),
        echo_(std::move(echo)),
        usage_(include_usage),
        piece_(std::move(piece)),
        offset_(echo_.size()) {}
  std::string opening() override {
    return echo_.empty() ? std::string()
                         : sse_event(completion_chunk_json(m_, echo_, std::nullopt, usage_));
  }
  std::string text(std::string_view delta, std::span<const TokenLogprob> logprobs) override {
    const nlohmann::ordered_json lp = piece_ && !logprobs.empty()
                                          ? completion_logprobs_json(logprobs, piece_, offset_)
                                          : nlohmann::ordered_json(nullptr);
    offset_ += delta.size();
    return sse_event(completion_chunk_json(m_, delta, std::nullopt, usage_, lp));
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
  PieceOf piece_;
  size_t offset_;  // bytes of text sent so far (the echo included): where the next token starts
};

class ResponsesStream final : public StreamFormat {
 public:
  ResponsesStream(const ResponseState& initial, ToolCallSyntax tools, PieceOf piece)
      : state_(initial), events_(initial), tools_(tools), held_(tools), piece_(std::move(piece)) {}
  std::string opening() override { return events_.opening(); }
  std::string text(std::string_view delta, std::span<const TokenLogprob> logprobs) override {
    // Logprobs entries ride on the next delta that goes out (text held back keeps them waiting).
    if (piece_ && !logprobs.empty()) {
      const nlohmann::ordered_json entries = chat_logprobs_json(logprobs, piece_);
      for (const auto& e : entries["content"]) {
        waiting_.push_back(e);
        all_.push_back(e);
      }
    }
    const std::string out = held_.take(delta);
    return out.empty() ? std::string() : events_.text_delta(out, take_waiting());
  }
  std::string closing(FinishReason finish, const std::string& full_text, const Usage& u) override {
    finish_response(state_, finish, full_text, u, tools_);
    state_.logprobs = all_;
    std::string out;
    if (state_.calls.empty())
      if (const std::string rest = held_.rest(); !rest.empty())
        out = events_.text_delta(rest, take_waiting());
    return out + events_.closing(state_);
  }
  std::string failure(const ApiError& e) override {
    fail_response(state_, e);
    return events_.closing(state_);
  }

 private:
  nlohmann::ordered_json take_waiting() {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    out.swap(waiting_);
    return out;
  }
  ResponseState state_;
  ResponseEvents events_;
  ToolCallSyntax tools_;
  HoldBack held_;
  PieceOf piece_;
  nlohmann::ordered_json waiting_ =
      nlohmann::ordered_json::array();                            // entries of text not yet sent
  nlohmann::ordered_json all_ = nlohmann::ordered_json::array();  // every token's entry
};

}  // namespace

std::unique_ptr<StreamFormat> chat_stream(const ResponseMeta& meta, bool include_usage,
                                          ToolCallSyntax tools, PieceOf piece) {
  return std::make_unique<ChatStream>(meta, include_usage, tools, std::move(piece));
}

std::unique_ptr<StreamFormat> completion_stream(const ResponseMeta& meta, std::string echo_prefix,
                                                bool include_usage, PieceOf piece) {
  return std::make_unique<CompletionStream>(meta, std::move(echo_prefix), include_usage,
                                            std::move(piece));
}

std::unique_ptr<StreamFormat> responses_stream(const ResponseState& initial, ToolCallSyntax tools,
                                               PieceOf piece) {
  return std::make_unique<ResponsesStream>(initial, tools, std::move(piece));
}

}  // namespace tangram::server
