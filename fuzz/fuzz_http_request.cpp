// The HTTP/1.1 request parser (src/http/request_parser): arbitrary bytes as what a client sends
// on one connection. Every request is either refused with a 4xx/5xx status and a reason or
// parsed within the limits (decoded body no larger than max_body, header count and bytes within
// theirs), pipelined requests one after another; feeding the same bytes in two pieces, split
// where the input says, gives exactly the same requests and the same verdict.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "http/request_parser.h"

using namespace tangram::http;

namespace {

struct Outcome {
  std::vector<std::string> requests;  // method, path and body of each complete request
  int error = 0;
  bool operator==(const Outcome&) const = default;
};

Limits limits() {
  Limits l;
  l.max_body = 4096;
  l.max_headers = 16;
  l.max_header_bytes = 1024;
  l.max_request_line = 256;
  return l;
}

// Parses everything in `pieces` (fed in order), collecting requests until an error.
Outcome parse(const std::vector<std::string_view>& pieces) {
  Outcome out;
  RequestParser p(limits());
  for (std::string_view piece : pieces) {
    while (!piece.empty()) {
      const size_t used = p.feed(piece);
      TG_FUZZ_CHECK(used <= piece.size());
      piece.remove_prefix(used);
      if (p.state() == RequestParser::State::Failed) {
        TG_FUZZ_CHECK(p.error_status() >= 400 && p.error_status() < 600);
        TG_FUZZ_CHECK(!p.error_message().empty());
        TG_FUZZ_CHECK(p.request().body.size() <= limits().max_body);
        out.error = p.error_status();
        return out;
      }
      if (p.state() == RequestParser::State::Complete) {
        Request r = p.take();
        TG_FUZZ_CHECK(r.body.size() <= limits().max_body);
        TG_FUZZ_CHECK(r.headers.size() <= limits().max_headers);
        TG_FUZZ_CHECK(!r.method.empty());
        (void)r.keep_alive();
        out.requests.push_back(r.method + ' ' + r.path + '\n' + r.body);
        continue;
      }
      TG_FUZZ_CHECK(piece.empty());  // a partial request has taken every byte it was given
      break;
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const Outcome whole = parse({all});
  const size_t split = size == 0 ? 0 : static_cast<size_t>(data[0]) * size / 256;
  const Outcome pieces = parse({all.substr(0, split), all.substr(split)});
  TG_FUZZ_CHECK(whole == pieces);
  return 0;
}
