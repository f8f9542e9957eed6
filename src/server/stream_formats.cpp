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
  std::string closing(const RequestResult& r, const Usage& u) override {
    std::string out;
    const ParsedReply reply =
        tools_ == ToolCallSyntax::None ? ParsedReply{} : parse_tool_calls(tools_, r.text);
    if (!reply.calls.empty()) {
      out = chat_tool_calls_chunks(m_, reply, usage_);
    } else {
      if (const std::string rest = held_.rest(); !rest.empty()) out = content(rest);
      out += sse_event(chat_chunk_json(m_, std::nullopt, std::nullopt, r.finish, usage_));
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
  std::string closing(const RequestResult& r, const Usage& u) override {
    std::string out = sse_event(completion_chunk_json(m_, "", r.finish, usage_));
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
  std::string closing(const RequestResult& r, const Usage& u) override {
    finish_response(state_, r.finish, r.text, u, tools_);
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

// Anthropic's sequence: message_start; per block content_block_start, its deltas,
// content_block_stop; then message_delta (stop reason and the final usage) and message_stop.
class MessagesStream final : public StreamFormat {
 public:
  MessagesStream(const MessageMeta& m, std::vector<std::string> stops, ToolCallSyntax tools)
      : m_(m), stops_(std::move(stops)), tools_(tools), held_(tools) {}
  std::string opening() override {
    ordered_json message = {{"id", m_.id},
                            {"type", "message"},
                            {"role", "assistant"},
                            {"model", m_.model},
                            {"content", ordered_json::array()},
                            {"stop_reason", nullptr},
                            {"stop_sequence", nullptr},
                            {"usage", anthropic_usage_json(Usage{m_.prompt_tokens, 0, 0})}};
    return anthropic_event({{"type", "message_start"}, {"message", std::move(message)}});
  }
  std::string text(std::string_view delta, std::span<const TokenLogprob>) override {
    return text_delta(held_.take(delta));
  }
  std::string closing(const RequestResult& r, const Usage& u) override {
    const ParsedReply reply =
        tools_ == ToolCallSyntax::None ? ParsedReply{} : parse_tool_calls(tools_, r.text);
    std::string out;
    if (reply.calls.empty()) out = text_delta(held_.rest());
    out += close_block();
    if (!reply.calls.empty()) {
      // The held-back text parsed as calls: each is a tool_use block, its input in one delta.
      const ordered_json blocks = message_content(ParsedReply{{}, reply.calls});
      for (const ordered_json& b : blocks) {
        ordered_json start = b;
        start["input"] = ordered_json::object();
        out += anthropic_event(
            {{"type", "content_block_start"}, {"index", index_}, {"content_block", start}});
        out += anthropic_event(
            {{"type", "content_block_delta"},
             {"index", index_},
             {"delta", {{"type", "input_json_delta"}, {"partial_json", dump_json(b["input"])}}}});
        out += anthropic_event({{"type", "content_block_stop"}, {"index", index_}});
        ++index_;
      }
    }
    const MessageStop stop = message_stop(r, stops_, !reply.calls.empty());
    out += anthropic_event(
        {{"type", "message_delta"},
         {"delta", {{"stop_reason", stop.reason}, {"stop_sequence", stop.sequence}}},
         {"usage", anthropic_usage_json(u)}});
    out += anthropic_event({{"type", "message_stop"}});
    return out;
  }
  std::string failure(const ApiError& e) override {
    return anthropic_event(anthropic_error_json(e));
  }

 private:
  std::string text_delta(const std::string& text) {
    if (text.empty()) return {};
    std::string out;
    if (!text_open_) {
      out = anthropic_event({{"type", "content_block_start"},
                             {"index", index_},
                             {"content_block", {{"type", "text"}, {"text", ""}}}});
      text_open_ = true;
    }
    return out + anthropic_event({{"type", "content_block_delta"},
                                  {"index", index_},
                                  {"delta", {{"type", "text_delta"}, {"text", text}}}});
  }
  std::string close_block() {
    if (!text_open_) return {};
    text_open_ = false;
    return anthropic_event({{"type", "content_block_stop"}, {"index", index_++}});
  }
  MessageMeta m_;
  std::vector<std::string> stops_;
  ToolCallSyntax tools_;
  HoldBack held_;
  bool text_open_ = false;
  int index_ = 0;  // the next block's index
};

// Ollama's newline-delimited JSON: a line per piece of text, a line with the calls (chat with
// tools), then the "done" line with the counts.
class OllamaStream final : public StreamFormat {
 public:
  OllamaStream(OllamaMeta m, ToolCallSyntax tools)
      : m_(std::move(m)), tools_(tools), held_(tools) {}
  std::string opening() override { return {}; }
  std::string text(std::string_view delta, std::span<const TokenLogprob>) override {
    const std::string out = held_.take(delta);
    return out.empty() ? std::string() : ndjson_line(ollama_chunk(m_, out));
  }
  std::string closing(const RequestResult& r, const Usage& u) override {
    const ParsedReply reply =
        tools_ == ToolCallSyntax::None ? ParsedReply{} : parse_tool_calls(tools_, r.text);
    std::string out;
    if (!reply.calls.empty())
      out = ndjson_line(ollama_calls_chunk(m_, ParsedReply{{}, reply.calls}));
    else if (const std::string rest = held_.rest(); !rest.empty())
      out = ndjson_line(ollama_chunk(m_, rest));
    return out + ndjson_line(ollama_final(m_, r, u, ""));
  }
  std::string failure(const ApiError& e) override { return ndjson_line(ollama_error_json(e)); }

 private:
  OllamaMeta m_;
  ToolCallSyntax tools_;
  HoldBack held_;
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

std::unique_ptr<StreamFormat> messages_stream(const MessageMeta& meta,
                                              std::vector<std::string> stop_sequences,
                                              ToolCallSyntax tools) {
  return std::make_unique<MessagesStream>(meta, std::move(stop_sequences), tools);
}

std::unique_ptr<StreamFormat> ollama_stream(OllamaMeta meta, ToolCallSyntax tools) {
  return std::make_unique<OllamaStream>(std::move(meta), tools);
}

}  // namespace tangram::server
