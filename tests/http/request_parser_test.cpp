// The HTTP/1.1 request parser against hand-written requests: framing (Content-Length, chunked,
// pipelining, byte-at-a-time feeding), every limit on what is decoded (gzip and chunked bodies
// included), and the malformed or ambiguous heads it must refuse.
#include "http/request_parser.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>
#include <vector>

namespace tangram::http {
namespace {

using namespace std::string_literals;

Limits small_limits() {
  Limits l;
  l.max_body = 1000;
  l.max_headers = 10;
  l.max_header_bytes = 512;
  l.max_request_line = 128;
  return l;
}

// Feeds all of `wire` at once; returns the parser.
RequestParser parse(const std::string& wire, Limits limits = small_limits()) {
  RequestParser p(limits);
  p.feed(wire);
  return p;
}

std::string compress(const std::string& data, int window_bits) {
  z_stream zs{};
  deflateInit2(&zs, 9, Z_DEFLATED, window_bits, 9, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, static_cast<uLong>(data.size())) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::string post(const std::string& headers, const std::string& body) {
  return "POST /v1/x HTTP/1.1\r\nHost: h\r\n" + headers + "\r\n" + body;
}

TEST(RequestParser, ParsesAGetWithHeadersAndPercentDecodedPath) {
  auto p = parse("GET /v1/a%20b?x=1 HTTP/1.1\r\nHost: h\r\nX-Thing:   v  \r\n\r\n");
  ASSERT_EQ(p.state(), RequestParser::State::Complete);
  Request r = p.take();
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.path, "/v1/a b");
  EXPECT_EQ(r.query, "x=1");
  EXPECT_EQ(r.header("host"), "h");
  EXPECT_EQ(r.header("X-Thing"), "v  ");  // leading space dropped, trailing kept
  EXPECT_TRUE(r.keep_alive());
  EXPECT_TRUE(r.body.empty());
}

TEST(RequestParser, ByteAtATimeEqualsOneShot) {
  const std::string wire = post("Transfer-Encoding: chunked\r\n",
                                "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nT: x\r\n\r\n");
  RequestParser p(small_limits());
  for (size_t i = 0; i < wire.size(); ++i) {
    ASSERT_NE(p.state(), RequestParser::State::Failed) << i << ": " << p.error_message();
    ASSERT_EQ(p.feed(std::string_view(wire).substr(i, 1)), 1u) << i;
  }
  ASSERT_EQ(p.state(), RequestParser::State::Complete) << p.error_message();
  EXPECT_EQ(p.take().body, "hello world");
}

TEST(RequestParser, StopsAtTheEndOfOneRequestForPipelining) {
  const std::string first = post("Content-Length: 3\r\n", "abc");
  const std::string second = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  RequestParser p(small_limits());
  EXPECT_EQ(p.feed(first + second), first.size());
  ASSERT_EQ(p.state(), RequestParser::State::Complete);
  EXPECT_EQ(p.take().body, "abc");
  EXPECT_EQ(p.state(), RequestParser::State::Empty);
  EXPECT_EQ(p.feed(second), second.size());
  ASSERT_EQ(p.state(), RequestParser::State::Complete);
  EXPECT_EQ(p.take().path, "/health");
}

TEST(RequestParser, DecodesGzipAndDeflateBodies) {
  const std::string body = R"({"messages": [{"role": "user", "content": "hi"}]})";
  for (int bits : {15 + 16, 15, -15}) {  // gzip, zlib-wrapped deflate, raw deflate
    const std::string enc = bits == 31 ? "gzip" : "deflate";
    const std::string z = compress(body, bits);
    auto p = parse(post(
        "Content-Encoding: " + enc + "\r\nContent-Length: " + std::to_string(z.size()) + "\r\n",
        z));
    ASSERT_EQ(p.state(), RequestParser::State::Complete) << bits << ": " << p.error_message();
    EXPECT_EQ(p.take().body, body);
  }
}

TEST(RequestParser, AGzipBombIsRefusedWhileInflatingWithinTheLimit) {
  Limits l = small_limits();
  l.max_body = 64 * 1024;
  const std::string bomb = compress(std::string(size_t{16} << 20, 'a'), 31);  // 16 MiB of 'a'
  ASSERT_LT(bomb.size(), 64 * 1024u);
  auto p = parse(
      post("Content-Encoding: gzip\r\nContent-Length: " + std::to_string(bomb.size()) + "\r\n",
           bomb),
      l);
  ASSERT_EQ(p.state(), RequestParser::State::Failed);
  EXPECT_EQ(p.error_status(), 413);
  EXPECT_LE(p.request().body.size(), l.max_body);  // never held more than the limit
  // Chunked and gzip together: the decoded size is what counts.
  std::string chunked;
  for (size_t at = 0; at < bomb.size(); at += 4096) {
    const std::string part = bomb.substr(at, 4096);
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", part.size());
    chunked += size + part + "\r\n";
  }
  chunked += "0\r\n\r\n";
  auto q = parse(post("Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n", chunked), l);
  ASSERT_EQ(q.state(), RequestParser::State::Failed);
  EXPECT_EQ(q.error_status(), 413);
}

TEST(RequestParser, ChunkedBodiesCountAgainstTheLimit) {
  std::string chunks;
  for (int i = 0; i < 20; ++i)
    chunks += "64\r\n" + std::string(100, 'x') + "\r\n";  // 2000 bytes > 1000
  auto p = parse(post("Transfer-Encoding: chunked\r\n", chunks + "0\r\n\r\n"));
  ASSERT_EQ(p.state(), RequestParser::State::Failed);
  EXPECT_EQ(p.error_status(), 413);
  EXPECT_LE(p.request().body.size(), 1000u);
}

TEST(RequestParser, ContentLengthBeyondTheLimitIsRefusedBeforeTheBody) {
  auto p = parse(post("Content-Length: 1001\r\n", ""));
  ASSERT_EQ(p.state(), RequestParser::State::Failed);
  EXPECT_EQ(p.error_status(), 413);
}

TEST(RequestParser, HeaderCountAndBytesAndRequestLineAreCapped) {
  std::string many;
  for (int i = 0; i < 11; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: x\r\n" + many + "\r\n").error_status(), 431);
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(600, 'a') + "\r\n\r\n")
                .error_status(),
            431);
  // Refused as soon as the limit is passed, before the line ends: a flood is never buffered.
  RequestParser p(small_limits());
  p.feed("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(600, 'a'));
  EXPECT_EQ(p.error_status(), 431);
  EXPECT_EQ(parse("GET /" + std::string(200, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n").error_status(),
            414);
}

struct Bad {
  const char* name;
  std::string wire;
  int status;
};

TEST(RequestParser, RefusesMalformedAndAmbiguousRequests) {
  const Bad cases[] = {
      {"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505},
      {"HTTP/0.9", "GET /\r\n", 400},
      {"HTTP/3", "GET / HTTP/3.0\r\n\r\n", 505},
      {"garbage version", "GET / HTTX/1.1\r\n\r\n", 400},
      {"extra space", "GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"bad method", "G(T / HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"relative target", "GET v1 HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"control char in target", std::string("GET /a\x01 HTTP/1.1\r\nHost: x\r\n\r\n"), 400},
      {"obs-fold", "GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n  b\r\n\r\n", 400},
      {"space before colon", "GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400},
      {"no colon", "GET / HTTP/1.1\r\nHost h\r\n\r\n", 400},
      {"NUL in value", "GET / HTTP/1.1\r\nHost: x\r\nX-Session-Id: a\0b\r\n\r\n"s, 400},
      {"bare CR", "GET / HTTP/1.1\r\nHost: x\r\nX: a\rb\r\n\r\n", 400},
      {"CL and TE", post("Content-Length: 3\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"), 400},
      {"two CLs differ", post("Content-Length: 3\r\nContent-Length: 4\r\n", "abcd"), 400},
      {"CL list differs", post("Content-Length: 3, 4\r\n", "abcd"), 400},
      {"CL not a number", post("Content-Length: 3x\r\n", "abc"), 400},
      {"CL negative", post("Content-Length: -1\r\n", ""), 400},
      {"CL huge", post("Content-Length: 99999999999999999999999\r\n", ""), 400},
      {"TE gzip", post("Transfer-Encoding: gzip\r\n", ""), 501},
      {"TE gzip, chunked", post("Transfer-Encoding: gzip, chunked\r\n", "0\r\n\r\n"), 501},
      {"TE in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
      {"brotli", post("Content-Encoding: br\r\nContent-Length: 1\r\n", "x"), 415},
      {"two codings", post("Content-Encoding: gzip, gzip\r\nContent-Length: 1\r\n", "x"), 415},
      {"corrupt gzip", post("Content-Encoding: gzip\r\nContent-Length: 4\r\n", "abcd"), 400},
      {"bad chunk size", post("Transfer-Encoding: chunked\r\n", "zz\r\nab\r\n0\r\n\r\n"), 400},
      {"chunk size overflow", post("Transfer-Encoding: chunked\r\n", "fffffffffffffffffff\r\n"),
       400},
      {"chunk longer than size", post("Transfer-Encoding: chunked\r\n", "2\r\nabc\r\n0\r\n\r\n"),
       400},
      {"unknown expectation", post("Expect: 200-ok\r\nContent-Length: 1\r\n", "x"), 417},
  };
  for (const Bad& c : cases) {
    auto p = parse(c.wire);
    EXPECT_EQ(p.state(), RequestParser::State::Failed) << c.name;
    EXPECT_EQ(p.error_status(), c.status) << c.name << ": " << p.error_message();
    EXPECT_FALSE(p.error_message().empty()) << c.name;
  }
}

TEST(RequestParser, AcceptsWhatTheRfcAllows) {
  // Empty lines before the request line, identical Content-Lengths, absolute-form targets,
  // lowercase chunked, a truncated-at-the-end body is just incomplete.
  auto a =
      parse("\r\nPOST http://host:1/v1/x?q HTTP/1.1\r\nHost: x\r\nContent-Length: 2, 2\r\n\r\nab");
  ASSERT_EQ(a.state(), RequestParser::State::Complete) << a.error_message();
  Request r = a.take();
  EXPECT_EQ(r.path, "/v1/x");
  EXPECT_EQ(r.body, "ab");
  auto b = parse(post("transfer-encoding: Chunked\r\n", "2\r\nab\r\n0\r\n\r\n"));
  ASSERT_EQ(b.state(), RequestParser::State::Complete) << b.error_message();
  auto c = parse(post("Content-Length: 5\r\n", "ab"));
  EXPECT_EQ(c.state(), RequestParser::State::Partial);
}

TEST(RequestParser, Http11NeedsExactlyOneHost) {
  // RFC 9112 3.2: a server answers 400 to an HTTP/1.1 request with no Host or several.
  auto none = parse("GET / HTTP/1.1\r\nX: y\r\n\r\n");
  EXPECT_EQ(none.error_status(), 400);
  EXPECT_NE(none.error_message().find("Host"), std::string::npos);
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").error_status(), 400);
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n").error_status(), 400);
  EXPECT_EQ(parse("GET / HTTP/1.0\r\n\r\n").state(),
            RequestParser::State::Complete);  // 1.0 may omit it
}

TEST(RequestParser, ChunkLinesAreReadStrictly) {
  // Whitespace around a chunk size and bare-LF chunk lines are what a lenient proxy and a
  // strict server read differently (request smuggling): all refused.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"leading space", " 2\r\nab\r\n0\r\n\r\n"},
      {"trailing space", "2 \r\nab\r\n0\r\n\r\n"},
      {"leading tab", "\t2\r\nab\r\n0\r\n\r\n"},
      {"space before an extension's size", " 2;x=y\r\nab\r\n0\r\n\r\n"},
      {"bare LF after the size", "2\nab\r\n0\r\n\r\n"},
      {"bare LF after the data", "2\r\nab\n0\r\n\r\n"},
      {"bare LF after the last chunk", "2\r\nab\r\n0\n\r\n"},
      {"bare LF ending the trailers", "2\r\nab\r\n0\r\n\n"},
      {"0x prefix", "0x2\r\nab\r\n0\r\n\r\n"},
      {"sign", "+2\r\nab\r\n0\r\n\r\n"},
  };
  for (const auto& [name, body] : bad) {
    auto p = parse(post("Transfer-Encoding: chunked\r\n", body));
    EXPECT_EQ(p.state(), RequestParser::State::Failed) << name;
    EXPECT_EQ(p.error_status(), 400) << name;
  }
  // What RFC 9112 7.1 allows: extensions (with whitespace before ';'), upper-case hex, trailers.
  auto ok = parse(post("Transfer-Encoding: chunked\r\n",
                       "A ;ext=1\r\n0123456789\r\n2;x\r\nab\r\n0\r\nT: v\r\n\r\n"));
  ASSERT_EQ(ok.state(), RequestParser::State::Complete) << ok.error_message();
  EXPECT_EQ(ok.take().body, "0123456789ab");
}

TEST(RequestParser, EmptyLinesBeforeTheRequestLineAreIgnored) {
  auto p = parse("\r\n\r\n\r\n\r\n\r\n\r\n\nGET / HTTP/1.1\r\nHost: h\r\n\r\n");
  ASSERT_EQ(p.state(), RequestParser::State::Complete) << p.error_message();
  // Only empty lines, without end, are not a request: refused after a bound.
  std::string flood;
  for (int i = 0; i < 100; ++i) flood += "\r\n";
  EXPECT_EQ(parse(flood).error_status(), 400);
}

TEST(RequestParser, HoldsTheBodyUntilReleased) {
  RequestParser p(small_limits(), /*hold_body=*/true);
  const std::string wire = post("Content-Length: 2\r\n", "ab");
  const size_t used = p.feed(wire);
  EXPECT_EQ(used, wire.size() - 2);  // the head, not one byte of the body
  EXPECT_TRUE(p.head_complete());
  EXPECT_TRUE(p.body_held());
  EXPECT_EQ(p.feed("ab"), 0u);
  p.release_body();
  EXPECT_EQ(p.feed("ab"), 2u);
  ASSERT_EQ(p.state(), RequestParser::State::Complete);
  // The next request is held again.
  p.take();
  EXPECT_EQ(p.feed(wire), wire.size() - 2);
  EXPECT_TRUE(p.body_held());
}

TEST(RequestParser, ExpectContinueIsAnnouncedOnceTheHeadIsIn) {
  RequestParser p(small_limits());
  p.feed(post("Expect: 100-continue\r\nContent-Length: 2\r\n", ""));
  EXPECT_TRUE(p.wants_continue());
  p.feed("ab");
  ASSERT_EQ(p.state(), RequestParser::State::Complete);
  EXPECT_FALSE(p.wants_continue());
}

TEST(Request, KeepAliveFollowsTheVersionAndConnectionHeader) {
  Request r;
  r.version_minor = 1;
  EXPECT_TRUE(r.keep_alive());
  r.headers = {{"Connection", "Upgrade, close"}};
  EXPECT_FALSE(r.keep_alive());
  r.version_minor = 0;
  r.headers = {};
  EXPECT_FALSE(r.keep_alive());
  r.headers = {{"connection", "Keep-Alive"}};
  EXPECT_TRUE(r.keep_alive());
}

}  // namespace
}  // namespace tangram::http
