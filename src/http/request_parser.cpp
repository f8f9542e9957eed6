#include "http/request_parser.h"

#include <zlib.h>

#include <array>
#include <charconv>

#include <fmt/format.h>

namespace tangram::http {
namespace {

constexpr size_t kMaxChunkLine = 1024;  // a chunk-size line with its extensions
constexpr size_t kMaxMethod = 32;

bool is_tchar(unsigned char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!is_tchar(static_cast<unsigned char>(c))) return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Calls f(element) for each element of a comma-separated header list, trimmed; empty ones skipped.
template <typename F>
void for_each_element(std::string_view list, F&& f) {
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string_view::npos) end = list.size();
    const std::string_view e = trim(list.substr(start, end - start));
    if (!e.empty()) f(e);
    start = end + 1;
  }
}

}  // namespace

// Inflates a gzip or zlib/raw-deflate body, appending to `out` and refusing to produce more than
// `limit` bytes: the limit is checked after every 16 KiB of output, so a small bomb costs at most
// the limit in memory and the time to inflate that much.
class ContentDecoder {
 public:
  enum class Outcome { Ok, TooLarge, Corrupt };

  explicit ContentDecoder(bool gzip) : gzip_(gzip) {}
  ~ContentDecoder() {
    if (initialised_) inflateEnd(&zs_);
  }
  ContentDecoder(const ContentDecoder&) = delete;
  ContentDecoder& operator=(const ContentDecoder&) = delete;

  Outcome feed(std::string_view in, std::string& out, size_t limit) {
    if (in.empty()) return Outcome::Ok;
    if (ended_) return Outcome::Corrupt;  // bytes after the end of the compressed stream
    if (!initialised_) {
      // "deflate" should be zlib-wrapped (RFC 9110) but some clients send raw deflate.
      int window = 15 + 32;  // zlib or gzip header, detected
      if (!gzip_) {
        const auto b0 = static_cast<unsigned char>(in[0]);
        const bool zlib_header =
            in.size() < 2
                ? (b0 & 0x0f) == 8
                : ((b0 & 0x0f) == 8 && ((b0 << 8) | static_cast<unsigned char>(in[1])) % 31 == 0);
        if (!zlib_header) window = -15;
      }
      if (inflateInit2(&zs_, window) != Z_OK) return Outcome::Corrupt;
      initialised_ = true;
    }
    zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    zs_.avail_in = static_cast<uInt>(in.size());
    std::array<char, 16384> buf;
    // Until the input is used up and inflate holds nothing back (its last output did not fill
    // the buffer), or the stream ends.
    while (!ended_) {
      zs_.next_out = reinterpret_cast<Bytef*>(buf.data());
      zs_.avail_out = static_cast<uInt>(buf.size());
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      const size_t produced = buf.size() - zs_.avail_out;
      if (out.size() + produced > limit) return Outcome::TooLarge;
      out.append(buf.data(), produced);
      if (rc == Z_STREAM_END)
        ended_ = true;
      else if (rc == Z_BUF_ERROR)
        break;  // no progress possible: it needs more input
      else if (rc != Z_OK)
        return Outcome::Corrupt;
      else if (zs_.avail_in == 0 && zs_.avail_out != 0)
        break;
    }
    if (ended_ && zs_.avail_in > 0) return Outcome::Corrupt;
    return Outcome::Ok;
  }

  bool ended() const { return ended_; }

 private:
  bool gzip_;
  bool initialised_ = false;
  bool ended_ = false;
  z_stream zs_{};
};

RequestParser::RequestParser(Limits limits, bool hold_body)
    : limits_(limits), hold_body_(hold_body), holding_(hold_body) {}
RequestParser::~RequestParser() = default;
RequestParser::RequestParser(RequestParser&&) noexcept = default;
RequestParser& RequestParser::operator=(RequestParser&&) noexcept = default;

void RequestParser::fail(int status, std::string message) {
  if (state_ == State::Failed) return;
  state_ = State::Failed;
  error_status_ = status;
  error_message_ = std::move(message);
}

Request RequestParser::take() {
  Request r = std::move(request_);
  *this = RequestParser(limits_, hold_body_);
  return r;
}

// Appends to line_ up to a '\n'; `have_line` tells whether the line is complete (line_ then holds
// it without its CRLF). Refuses lines longer than `limit` with `too_long_status`.
size_t RequestParser::take_line(std::string_view data, size_t limit, int too_long_status,
                                bool& have_line, bool crlf_only) {
  have_line = false;
  const size_t nl = data.find('\n');
  const size_t take = nl == std::string_view::npos ? data.size() : nl + 1;
  if (line_.size() + take > limit + 2) {  // +2: the CRLF is not part of the limit
    fail(too_long_status,
         too_long_status == 414   ? fmt::format("the request line is longer than {} bytes", limit)
         : too_long_status == 431 ? fmt::format("the request's headers are larger than {} bytes",
                                                limits_.max_header_bytes)
                                  : "a chunk-size line is too long");
    return take;
  }
  line_.append(data.substr(0, take));
  if (nl == std::string_view::npos) return take;
  line_.pop_back();  // '\n'
  if (!line_.empty() && line_.back() == '\r') {
    line_.pop_back();
  } else if (crlf_only) {
    fail(400, "a chunk line ends in a bare LF; chunked framing needs CRLF");
    return take;
  }
  if (line_.find('\r') != std::string::npos) {
    fail(400, "a bare CR in the request's head");
    return take;
  }
  have_line = true;
  return take;
}

size_t RequestParser::feed(std::string_view data) {
  size_t used = 0;
  while (used < data.size() && state_ != State::Complete && state_ != State::Failed &&
         !body_held()) {
    if (state_ == State::Empty) state_ = State::Partial;
    const std::string_view rest = data.substr(used);
    bool have_line = false;
    switch (stage_) {
      case Stage::RequestLine:
        used += take_line(rest, limits_.max_request_line, 414, have_line);
        if (have_line) {
          if (line_.empty() && request_.method.empty()) {
            // RFC 9112 2.2: empty lines before a request line are ignored (a client may send a
            // CRLF after a body); a stream of nothing else is not a request.
            if (++blank_lines_ > 64) fail(400, "too many empty lines before the request line");
          } else {
            parse_request_line(line_);
          }
          line_.clear();
        }
        break;
      case Stage::Headers:
      case Stage::Trailers: {
        const size_t budget =
            limits_.max_header_bytes > header_bytes_ ? limits_.max_header_bytes - header_bytes_ : 0;
        used += take_line(rest, budget, 431, have_line, /*crlf_only=*/stage_ == Stage::Trailers);
        if (!have_line) break;
        header_bytes_ += line_.size() + 2;
        if (line_.empty()) {
          if (stage_ == Stage::Headers)
            headers_done();
          else
            finish_body();
        } else if (stage_ == Stage::Headers) {
          parse_header_line(line_);
        }  // trailer fields are counted and dropped
        line_.clear();
        break;
      }
      case Stage::Body:
        used += take_body(rest);
        if (remaining_ == 0 && state_ != State::Failed) finish_body();
        break;
      case Stage::ChunkSize:
        used += take_line(rest, kMaxChunkLine, 400, have_line, /*crlf_only=*/true);
        if (have_line) {
          parse_chunk_size(line_);
          line_.clear();
        }
        break;
      case Stage::ChunkData:
        used += take_body(rest);
        if (remaining_ == 0) stage_ = Stage::ChunkDataEnd;
        break;
      case Stage::ChunkDataEnd:
        used += take_line(rest, 0, 400, have_line, /*crlf_only=*/true);
        if (have_line) {
          if (!line_.empty()) fail(400, "a chunk's data is longer than its size");
          stage_ = Stage::ChunkSize;
          line_.clear();
        }
        break;
      case Stage::Done:
        return used;
    }
  }
  return used;
}

void RequestParser::parse_request_line(std::string_view line) {
  if (line.rfind("PRI * HTTP/2", 0) == 0)
    return fail(505, "HTTP/2 is not supported by this server: speak HTTP/1.1");
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos ||
      line.find(' ', sp2 + 1) != std::string_view::npos)
    return fail(400, "the request line must be: METHOD target HTTP/1.1");
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(method) || method.size() > kMaxMethod)
    return fail(400, "the request's method is not a valid token");
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' ||
      version[5] < '0' || version[5] > '9' || version[7] < '0' || version[7] > '9')
    return fail(400, "the request line's version is not HTTP/1.x");
  if (version[5] != '1')
    return fail(505, fmt::format("{} is not supported by this server: speak HTTP/1.1", version));
  for (char c : target)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      return fail(400, "a control character in the request target");
  std::string_view origin = target;
  if (origin.rfind("http://", 0) == 0 || origin.rfind("https://", 0) == 0) {  // absolute-form
    const size_t slash = origin.find('/', origin.find("//") + 2);
    origin = slash == std::string_view::npos ? std::string_view("/") : origin.substr(slash);
  }
  if (origin.empty() || (origin[0] != '/' && origin != "*"))
    return fail(400, "the request target must be a path");
  request_.method = std::string(method);
  request_.target = std::string(target);
  const size_t q = origin.find('?');
  request_.path = percent_decode(origin.substr(0, q));
  if (q != std::string_view::npos) request_.query = std::string(origin.substr(q + 1));
  request_.version_minor = version[7] - '0';
  stage_ = Stage::Headers;
}

void RequestParser::parse_header_line(std::string_view line) {
  if (line.front() == ' ' || line.front() == '\t')
    return fail(400, "obsolete header line folding is not accepted");
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return fail(400, "a header line without ':'");
  const std::string_view name = line.substr(0, colon);
  if (!is_token(name))
    return fail(400, "a header name that is not a token (or whitespace before its ':')");
  // Leading whitespace is dropped; trailing whitespace is kept, so a credential or an id with
  // a stray space is refused by whoever reads it rather than silently matched.
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f)
      return fail(400, "a control character in a header value");
  }
  if (request_.headers.size() >= limits_.max_headers)
    return fail(431, fmt::format("the request has more than {} headers", limits_.max_headers));
  request_.headers.push_back({std::string(name), std::string(value)});
}

void RequestParser::headers_done() {
  bool has_te = false, te_chunked_only = true;
  int te_codings = 0;
  bool has_cl = false;
  uint64_t length = 0;
  std::string bad_coding;
  int encodings = 0;
  bool gzip = false;
  for (const Header& h : request_.headers) {
    if (iequals(h.name, "Transfer-Encoding")) {
      has_te = true;
      for_each_element(h.value, [&](std::string_view e) {
        ++te_codings;
        if (!iequals(e, "chunked")) te_chunked_only = false;
      });
    } else if (iequals(h.name, "Content-Length")) {
      bool bad = false;
      for_each_element(h.value, [&](std::string_view e) {
        uint64_t v = 0;
        const auto [p, ec] = std::from_chars(e.data(), e.data() + e.size(), v);
        if (ec != std::errc() || p != e.data() + e.size() || e.size() > 19)
          bad = true;
        else if (has_cl && v != length)
          bad = true;
        else {
          has_cl = true;
          length = v;
        }
      });
      if (bad || trim(h.value).empty())
        return fail(400, "an invalid or conflicting Content-Length");
    } else if (iequals(h.name, "Content-Encoding")) {
      for_each_element(h.value, [&](std::string_view e) {
        if (iequals(e, "identity")) return;
        ++encodings;
        if (iequals(e, "gzip") || iequals(e, "x-gzip"))
          gzip = true;
        else if (!iequals(e, "deflate"))
          bad_coding = std::string(e);
      });
    } else if (iequals(h.name, "Expect")) {
      if (!iequals(trim(h.value), "100-continue"))
        return fail(417, "the only expectation understood is 100-continue");
      expect_continue_ = true;
    }
  }
  if (request_.version_minor >= 1 && request_.header_count("Host") != 1)
    return fail(400, request_.header_count("Host") == 0
                         ? "an HTTP/1.1 request must carry a Host header"
                         : "the request carries more than one Host header");
  if (has_te && has_cl)
    return fail(400, "a request may not carry both Content-Length and Transfer-Encoding");
  if (has_te && request_.version_minor == 0)
    return fail(400, "Transfer-Encoding is not allowed in HTTP/1.0");
  if (has_te && (!te_chunked_only || te_codings != 1))
    return fail(501, "the only transfer coding accepted is chunked");
  if (!bad_coding.empty() || encodings > 1)
    return fail(
        415, fmt::format("the content coding '{}' is not supported: send identity, gzip or deflate",
                         bad_coding.empty() ? std::string("(several)") : bad_coding));
  if (encodings == 1) decoder_ = std::make_unique<ContentDecoder>(gzip);
  if (has_cl && length > limits_.max_body)
    return fail(413, fmt::format("the request body is larger than {} bytes", limits_.max_body));
  header_bytes_ = 0;  // the trailer section (chunked) has a budget of its own
  if (has_te) {
    chunked_ = true;
    stage_ = Stage::ChunkSize;
  } else if (has_cl && length > 0) {
    remaining_ = length;
    stage_ = Stage::Body;
  } else {
    finish_body();
  }
}

void RequestParser::parse_chunk_size(std::string_view line) {
  // chunk-size [ BWS ";" chunk-ext ]: hex digits first; whitespace only before an extension.
  const size_t semi = line.find(';');
  std::string_view size = line.substr(0, semi);
  if (semi != std::string_view::npos) size = trim(size);  // BWS before ';'
  if (!line.empty() && (line.front() == ' ' || line.front() == '\t'))
    size = {};  // never before the digits
  uint64_t n = 0;
  const auto [p, ec] = std::from_chars(size.data(), size.data() + size.size(), n, 16);
  if (size.empty() || size.size() > 15 || ec != std::errc() || p != size.data() + size.size())
    return fail(400, "an invalid chunk size (hex digits, then CRLF or a ';' extension)");
  if (n == 0) {
    stage_ = Stage::Trailers;
    return;
  }
  if (request_.body.size() + n > limits_.max_body && decoder_ == nullptr)
    return fail(413, fmt::format("the request body is larger than {} bytes", limits_.max_body));
  remaining_ = n;
  stage_ = Stage::ChunkData;
}

// Takes up to remaining_ bytes of body (Content-Length) or chunk data; returns how many.
size_t RequestParser::take_body(std::string_view rest) {
  const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, rest.size()));
  append_body(rest.substr(0, n));
  remaining_ -= n;
  return n;
}

void RequestParser::append_body(std::string_view bytes) {
  if (bytes.empty() || state_ == State::Failed) return;
  if (decoder_ == nullptr) {
    if (request_.body.size() + bytes.size() > limits_.max_body)
      return fail(413, fmt::format("the request body is larger than {} bytes", limits_.max_body));
    request_.body.append(bytes);
    return;
  }
  switch (decoder_->feed(bytes, request_.body, limits_.max_body)) {
    case ContentDecoder::Outcome::Ok:
      return;
    case ContentDecoder::Outcome::TooLarge:
      return fail(413,
                  fmt::format("the request body decodes to more than {} bytes", limits_.max_body));
    case ContentDecoder::Outcome::Corrupt:
      return fail(400, "the request body is not valid gzip/deflate data");
  }
}

void RequestParser::finish_body() {
  if (state_ == State::Failed) return;
  if (decoder_ != nullptr && !decoder_->ended())
    return fail(400, "the compressed request body is truncated");
  stage_ = Stage::Done;
  state_ = State::Complete;
}

}  // namespace tangram::http
