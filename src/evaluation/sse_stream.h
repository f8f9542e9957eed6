// Client-side parsing of a streamed OpenAI completion (Server-Sent Events), for the HTTP load
// generator (http_load.h). Bytes arrive in arbitrary pieces (a TCP read may end mid-line or
// mid-UTF-8 sequence), so both parsers are incremental: feed() whatever arrived, in order.
//
// SSE framing (the subset OpenAI-compatible servers use): lines end with "\n" or "\r\n"; a line
// "data: X" (the space is optional) adds X to the event's data (several data lines are joined
// with "\n"); a line starting with ':' is a comment (keep-alive); other fields (event:, id:,
// retry:) are ignored; an empty line ends the event.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tangram {

class SseParser {
 public:
  // The data of every event completed by these bytes, in order. Events without data lines
  // (only comments or other fields) yield nothing.
  std::vector<std::string> feed(std::string_view bytes);
  int64_t comments() const { return comments_; }  // comment lines seen (": keep-alive")

 private:
  void line(std::string_view l, std::vector<std::string>& out);
  std::string partial_;  // bytes of an unfinished line
  std::string data_;     // data of the unfinished event
  bool has_data_ = false;
  int64_t comments_ = 0;
};

// The state of one streamed /v1/completions response as its events arrive:
//   {"object": "text_completion", "choices": [{"text": "...", "finish_reason": null}], ...}
//   ... a chunk whose finish_reason is "stop" or "length",
//   {"choices": [], "usage": {"prompt_tokens", "completion_tokens", "total_tokens",
//                             "prompt_tokens_details": {"cached_tokens"}}}   (include_usage)
//   [DONE]
// Chat streams (/v1/chat/completions) read the same, their text from "delta": {"content": ...}.
// An event {"error": {"message": ...}} (a failure mid-stream) or an event that is not JSON of
// this shape sets error(); the stream should then be treated as failed.
class CompletionStreamReader {
 public:
  // Returns how many non-empty text pieces the events completed by these bytes carried (the
  // caller stamps the first token's time when this first turns non-zero).
  int64_t feed(std::string_view bytes);

  bool done() const { return done_; }  // "data: [DONE]" seen
  const std::string& text() const { return text_; }
  const std::string& finish_reason() const { return finish_reason_; }  // "" until the last chunk
  bool has_usage() const { return has_usage_; }
  int64_t prompt_tokens() const { return prompt_tokens_; }
  int64_t completion_tokens() const { return completion_tokens_; }
  int64_t cached_tokens() const { return cached_tokens_; }
  const std::string& error() const { return error_; }  // "" unless the stream failed
  int64_t text_pieces() const { return text_pieces_; }
  int64_t keep_alives() const { return parser_.comments(); }

 private:
  int64_t event(const std::string& data);
  SseParser parser_;
  std::string text_;
  std::string finish_reason_;
  std::string error_;
  bool done_ = false;
  bool has_usage_ = false;
  int64_t prompt_tokens_ = 0, completion_tokens_ = 0, cached_tokens_ = 0;
  int64_t text_pieces_ = 0;
};

}  // namespace tangram
