// HTTP/1.1 messages as the server's handlers see them: a fully read request (its body already
// decoded from any transfer and content coding, within the limits) and the response a handler
// fills in, either a whole body or a stream of chunks.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tangram::http {

struct Header {
  std::string name;
  std::string value;
};

// ASCII case-insensitive comparison (header names, tokens).
bool iequals(std::string_view a, std::string_view b);

struct Request {
  std::string method;
  std::string target;     // the request-target as sent
  std::string path;       // the target's path, percent-decoded
  std::string query;      // after '?', as sent
  int version_minor = 1;  // HTTP/1.<minor>
  std::vector<Header> headers;
  std::string body;  // decoded: no chunk framing, no gzip
  std::string remote_addr;
  std::vector<std::string> params;  // what a route's ":name" segments matched
  // True once the client has hung up (or half-closed) its connection; for a handler that waits
  // a long time before it writes anything (a non-streamed generation).
  std::function<bool()> peer_closed = [] { return false; };

  const std::string* find_header(std::string_view name) const;  // the first such header
  std::string header(std::string_view name) const;              // "" when absent
  size_t header_count(std::string_view name) const;
  // Whether the connection may carry another request after this one (HTTP/1.1 unless
  // "Connection: close"; HTTP/1.0 only with "Connection: keep-alive").
  bool keep_alive() const;
};

// Where a streamed response's chunks go.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  // Sends `data` as one chunk now; false once the client is gone (then stop writing).
  virtual bool write(std::string_view data) = 0;
};

struct Response {
  int status = 200;
  std::vector<Header> headers;
  std::string body;
  // A streamed body (chunked transfer coding): runs on the worker once the headers are sent
  // and returns when the stream is complete.
  std::function<void(StreamSink&)> stream;
  // The client left before anything was written: close the connection without an answer
  // (`status` still says what to count, e.g. 499).
  bool abandon = false;

  void set_header(std::string name, std::string value);  // replaces one of the same name
  std::string header(std::string_view name) const;
  void set_content(std::string content, std::string content_type);
  void set_stream(std::string content_type, std::function<void(StreamSink&)> writer);
};

// The reason phrase of a status code ("OK", "Not Found", ...).
const char* status_reason(int status);

// Percent-decodes a URL path. '+' stays '+' (it means a space only in form bodies).
std::string percent_decode(std::string_view s);

}  // namespace tangram::http
