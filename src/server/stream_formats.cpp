#include "server/stream_formats.h"

#include <functional>

#include "chat/tool_call_stream.h"

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

// Calls streamed as they are generated (chat/tool_call_stream.h), with the ids they were
// announced under, and what is left of them once the reply has ended.
class StreamedCalls {
 public:
  // make_id(i): the id call i is announced under.
  StreamedCalls(ToolCallSyntax tools, std::function<std::string(int)> make_id)
      : streamer_(tools), make_id_(std::move(make_id)) {}
  // The pieces `delta` completes; a call's first piece is given its id.
  std::vector<ToolCallDelta> take(std::string_view delta) {
    std::vector<ToolCallDelta> out = streamer_.append(delta);
    for (const ToolCallDelta& d : out)
      if (d.opens) ids_.push_back(make_id_(d.index));
    return out;
  }
  int count() const { return streamer_.calls(); }
  const std::string& id(int i) const { return ids_[static_cast<size_t>(i)]; }
  // What is left to send once the reply parsed as `reply`: the arguments of a streamed call that
  // sent none (a model writing them as a JSON string), then the calls not opened yet, whole
  // (opens set; their ids are the caller's to give).
  std::vector<ToolCallDelta> rest(const ParsedReply& reply) const {
    std::vector<ToolCallDelta> out;
    for (size_t i = 0; i < reply.calls.size(); ++i) {
      const auto index = static_cast<int>(i);
      if (index < count()) {
        if (streamer_.arguments(index).empty())
          out.push_back(ToolCallDelta{index, false, "", reply.calls[i].arguments});
      } else {
        out.push_back(ToolCallDelta{index, true, reply.calls[i].name, reply.calls[i].arguments});
      }
    }
    return out;
  }

 private:
  ToolCallStreamer streamer_;
  std::function<std::string(int)> make_id_;
  std::vector<std::string> ids_;
};

class ChatStream final : public StreamFormat {
 public:
  ChatStream(const ResponseMeta& m, bool include_usage, ToolCallSyntax tools, PieceOf piece)
      : m_(m),
        usage_(include_usage),
        tools_(tools),
        held_(tools),
        calls_(tools, [](int) { return random_id("call_"); }),
        piece_(std::move(piece)) {}
  std::string opening() override {
    return sse_event(chat_chunk_json(m_, "assistant", "", std::nullopt, usage_));
  }
  std::string text(std::string_view delta, std::span<const TokenLogprob> logprobs) override {
    const std::string out = held_.take(delta);
    const nlohmann::ordered_json lp = piece_ && !logprobs.empty()
                                          ? chat_logprobs_json(logprobs, piece_)
                                          : nlohmann::ordered_json(nullptr);
    std::string events;
    if (!out.empty() || !lp.is_null())
      events = sse_event(chat_chunk_json(m_, std::nullopt, out, std::nullopt, usage_, lp));
    for (const ToolCallDelta& d : calls_.take(delta))
      events += chat_tool_call_piece(m_, d.index, d.opens ? calls_.id(d.index) : std::string(),
                                     d.name, d.arguments, usage_);
    return events;
  }
  std::string closing(const RequestResult& r, const Usage& u) override {
    std::string out;
    const ParsedReply reply =
        tools_ == ToolCallSyntax::None ? ParsedReply{} : parse_tool_calls(tools_, r.text);
    if (!reply.calls.empty()) {
      for (const ToolCallDelta& d : calls_.rest(reply)) {
        const ParsedToolCall& c = reply.calls[static_cast<size_t>(d.index)];
        const std::string id = !d.opens ? std::string() : c.id.empty() ? random_id("call_") : c.id;
        out += chat_tool_call_piece(m_, d.index, id, d.name, d.arguments, usage_);
      }
      out += chat_tool_calls_end(m_, usage_);
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
  StreamedCalls calls_;
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
      : state_(initial),
        events_(initial),
        tools_(tools),
        held_(tools),
        calls_(tools, [this](int i) { return call_id_of(state_, static_cast<size_t>(i), ""); }),
        piece_(std::move(piece)) {}
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
    std::string events = out.empty() ? std::string() : events_.text_delta(out, take_waiting());
    for (const ToolCallDelta& d : calls_.take(delta)) {
      if (d.opens)
        events += events_.call_opened(ResponseState::Call{
            call_item_id(state_, static_cast<size_t>(d.index)), calls_.id(d.index), d.name, ""});
      events += events_.call_arguments(d.index, d.arguments);
    }
    return events;
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
  StreamedCalls calls_;
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
      : m_(m), stops_(std::move(stops)), tools_(tools), held_(tools), calls_(tools, [](int) {
          return random_id("toolu_");
        }) {}
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
    std::string out = text_delta(held_.take(delta));
    // A call streams as a tool_use block: opened with its name, its input in pieces.
    for (const ToolCallDelta& d : calls_.take(delta)) {
      if (d.opens) {
        out += close_block();
        out += anthropic_event({{"type", "content_block_start"},
                                {"index", index_},
                                {"content_block",
                                 {{"type", "tool_use"},
                                  {"id", calls_.id(d.index)},
                                  {"name", d.name},
                                  {"input", ordered_json::object()}}}});
        block_open_ = true;
      }
      out += input_delta(d.arguments);
    }
    return out;
  }
  std::string closing(const RequestResult& r, const Usage& u) override {
    const ParsedReply reply =
        tools_ == ToolCallSyntax::None ? ParsedReply{} : parse_tool_calls(tools_, r.text);
    std::string out;
    if (reply.calls.empty()) out = text_delta(held_.rest());
    // A streamed call that sent no input (a model writing it as a JSON string) gets it now while
    // its block is open (the last one); an earlier one's block is closed already.
    std::vector<ToolCallDelta> rest = calls_.rest(reply);
    if (!rest.empty() && !rest.front().opens && rest.front().index == calls_.count() - 1) {
      out += input_delta(rest.front().arguments);
      rest.erase(rest.begin());
    }
    out += close_block();
    if (!reply.calls.empty()) {
      // The calls not streamed: each is a tool_use block, its input in one delta.
      ParsedReply left;
      for (const ToolCallDelta& d : rest)
        if (d.opens) left.calls.push_back(reply.calls[static_cast<size_t>(d.index)]);
      const ordered_json blocks = message_content(left);
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
    if (text.empty() || calls_.count() > 0) return {};  // text after a call: not streamed
    std::string out;
    if (!block_open_) {
      out = anthropic_event({{"type", "content_block_start"},
                             {"index", index_},
                             {"content_block", {{"type", "text"}, {"text", ""}}}});
      block_open_ = true;
    }
    return out + anthropic_event({{"type", "content_block_delta"},
                                  {"index", index_},
                                  {"delta", {{"type", "text_delta"}, {"text", text}}}});
  }
  std::string input_delta(const std::string& json) {
    if (json.empty()) return {};
    return anthropic_event({{"type", "content_block_delta"},
                            {"index", index_},
                            {"delta", {{"type", "input_json_delta"}, {"partial_json", json}}}});
  }
  std::string close_block() {
    if (!block_open_) return {};
    block_open_ = false;
    return anthropic_event({{"type", "content_block_stop"}, {"index", index_++}});
  }
  MessageMeta m_;
  std::vector<std::string> stops_;
  ToolCallSyntax tools_;
  HoldBack held_;
  StreamedCalls calls_;
  bool block_open_ = false;  // the text block or a streamed call's tool_use block
  int index_ = 0;            // the next block's index
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
