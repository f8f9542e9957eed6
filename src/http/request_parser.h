// An incremental HTTP/1.1 request parser that enforces the server's limits on what it decodes,
// not on what was sent: the request line, the header block (count and bytes), and the body after
// chunked transfer coding and gzip/deflate content coding are removed. A compressed or chunked
// body that would expand past the limit is refused while it is being decoded, so no request can
// make the server hold or inflate more than `max_body` bytes.
//
// Refused outright (each with its status): HTTP/0.9 and HTTP/2 prefaces, versions other than
// 1.0/1.1, an HTTP/1.1 request without exactly one Host header, obsolete line folding,
// whitespace before a header's colon, control characters in a header, Content-Length together
// with Transfer-Encoding or several differing Content-Lengths (request smuggling), transfer
// codings other than chunked, content codings other than gzip, deflate and identity. The chunked
// framing is read strictly (a smuggling risk behind a proxy that reads it another way): every
// chunk line ends in CRLF, and a chunk size is hex digits with nothing before them and only an
// extension (";...") after them. Empty lines before a request line are ignored (RFC 9112 2.2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "http/http_message.h"

namespace tangram::http {

struct Limits {
  size_t max_request_line = 8 * 1024;   // 414 beyond
  size_t max_header_bytes = 64 * 1024;  // all header lines together; 431 beyond
  size_t max_headers = 100;             // 431 beyond
  size_t max_body = size_t{8} << 20;    // decoded body; 413 beyond
};

class ContentDecoder;  // gzip / deflate, bounded

class RequestParser {
 public:
  enum class State { Empty, Partial, Complete, Failed };

  // hold_body: feed() stops once the head is complete and reads no body byte until
  // release_body(), so a caller can refuse the request on its headers alone (authentication)
  // before the body costs anything.
  explicit RequestParser(Limits limits, bool hold_body = false);
  ~RequestParser();
  RequestParser(RequestParser&&) noexcept;
  RequestParser& operator=(RequestParser&&) noexcept;

  // Consumes a prefix of `data` and returns its length. Stops at the end of one request: the
  // rest of `data` belongs to the next (pipelining); feed it again after take().
  size_t feed(std::string_view data);

  State state() const { return state_; }
  // The request line and every header have been read (the body may still be to come).
  bool head_complete() const { return stage_ > Stage::Headers; }
  // Held after its head (hold_body): feed() takes no body byte until this is called.
  bool body_held() const { return holding_ && head_complete() && state_ == State::Partial; }
  void release_body() { holding_ = false; }
  // The headers are complete and the client waits for "100 Continue" before sending the body.
  bool wants_continue() const {
    return stage_ > Stage::Headers && expect_continue_ && stage_ != Stage::Done;
  }
  // Failed: the status to answer with (400, 413, 414, 415, 431, 501, 505) and why.
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }
  // What was parsed so far (method and path are known once the request line was read).
  const Request& request() const { return request_; }
  // Complete: hands the request over and makes the parser ready for the next one.
  Request take();

 private:
  enum class Stage {
    RequestLine,
    Headers,
    Body,
    ChunkSize,
    ChunkData,
    ChunkDataEnd,
    Trailers,
    Done
  };

  // crlf_only: a bare LF does not end the line (chunked framing), it is an error.
  size_t take_line(std::string_view data, size_t limit, int too_long_status, bool& have_line,
                   bool crlf_only = false);
  void parse_request_line(std::string_view line);
  void parse_header_line(std::string_view line);
  void headers_done();
  void parse_chunk_size(std::string_view line);
  size_t take_body(std::string_view rest);
  void append_body(std::string_view bytes);
  void finish_body();
  void fail(int status, std::string message);

  Limits limits_;
  bool hold_body_ = false;
  bool holding_ = false;    // hold_body_, and release_body() not yet called for this request
  size_t blank_lines_ = 0;  // empty lines before the request line
  State state_ = State::Empty;
  Stage stage_ = Stage::RequestLine;
  Request request_;
  std::string line_;  // a line being assembled across feeds
  size_t header_bytes_ = 0;
  uint64_t remaining_ = 0;  // body bytes (Content-Length) or chunk bytes still to read
  bool chunked_ = false;
  bool expect_continue_ = false;
  std::unique_ptr<ContentDecoder> decoder_;  // null: identity
  int error_status_ = 0;
  std::string error_message_;
};

}  // namespace tangram::http
