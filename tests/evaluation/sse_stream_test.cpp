// The client-side SSE parsers of the HTTP load generator: framing at every split point, and
// the completion stream's text, finish reason, usage and failures.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "evaluation/sse_stream.h"

namespace tangram {
namespace {

// A stream as `tangram serve` sends it for /v1/completions with include_usage.
const std::string kStream =
    "data: "
    "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"text\":\"Hel\",\"index\":0,"
    "\"finish_reason\":null}],\"usage\":null}\n\n"
    ": keep-alive\n\n"
    "data: "
    "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"text\":\"\",\"index\":0,"
    "\"finish_reason\":null}],\"usage\":null}\n\n"
    "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"text\":\"lo "
    "\\u00e9\",\"index\":0,"
    "\"finish_reason\":null}],\"usage\":null}\n\n"
    "data: "
    "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"text\":\"\",\"index\":0,"
    "\"finish_reason\":\"length\"}],\"usage\":null}\n\n"
    "data: "
    "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[],\"usage\":{\"prompt_tokens\":"
    "40,"
    "\"completion_tokens\":3,\"total_tokens\":43,\"prompt_tokens_details\":{\"cached_tokens\":32}}}"
    "\n\n"
    "data: [DONE]\n\n";

std::vector<std::string> feed_in_pieces(SseParser& p, const std::string& s, size_t piece) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size(); i += piece) {
    auto got = p.feed(std::string_view(s).substr(i, piece));
    out.insert(out.end(), got.begin(), got.end());
  }
  return out;
}

TEST(SseParser, SameEventsWhateverTheReadSizes) {
  SseParser whole;
  const auto expected = whole.feed(kStream);
  ASSERT_EQ(expected.size(), 6u);
  EXPECT_EQ(expected.back(), "[DONE]");
  EXPECT_EQ(whole.comments(), 1);
  for (size_t piece : {1, 2, 3, 7, 64}) {
    SseParser p;
    EXPECT_EQ(feed_in_pieces(p, kStream, piece), expected) << "pieces of " << piece;
    EXPECT_EQ(p.comments(), 1);
  }
}

TEST(SseParser, CrLfMultiLineDataAndOtherFields) {
  SseParser p;
  const auto events = p.feed(
      "event: message\r\nid: 7\r\ndata: a\r\ndata:b\r\n\r\nretry: 10\n\n:c1\n:c2\ndata: "
      "[DONE]\n\n");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0], "a\nb");  // data lines joined by "\n"; the space after ':' is optional
  EXPECT_EQ(events[1], "[DONE]");
  EXPECT_EQ(p.comments(), 2);
}

TEST(SseParser, AnUnfinishedEventIsNotDelivered) {
  SseParser p;
  EXPECT_TRUE(p.feed("data: {\"x\":1}\n").empty());  // no blank line yet
  EXPECT_TRUE(p.feed("").empty());
  const auto events = p.feed("\n");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0], "{\"x\":1}");
}

TEST(CompletionStreamReader, ReadsTextFinishAndUsageAtEverySplit) {
  for (size_t piece : {size_t{1}, size_t{5}, size_t{13}, kStream.size()}) {
    CompletionStreamReader r;
    int64_t pieces = 0;
    int64_t first_piece_feed = -1;  // the feed that first returned text
    int64_t feeds = 0;
    for (size_t i = 0; i < kStream.size(); i += piece, ++feeds) {
      const int64_t k = r.feed(std::string_view(kStream).substr(i, piece));
      if (k > 0 && first_piece_feed < 0) first_piece_feed = feeds;
      pieces += k;
    }
    EXPECT_EQ(pieces, 2) << piece;  // the empty text chunks are not tokens a user sees
    EXPECT_EQ(r.text(), "Hello \xC3\xA9") << piece;
    EXPECT_EQ(r.finish_reason(), "length");
    EXPECT_TRUE(r.done());
    ASSERT_TRUE(r.has_usage());
    EXPECT_EQ(r.prompt_tokens(), 40);
    EXPECT_EQ(r.completion_tokens(), 3);
    EXPECT_EQ(r.cached_tokens(), 32);
    EXPECT_EQ(r.keep_alives(), 1);
    EXPECT_TRUE(r.error().empty()) << r.error();
    // The first text arrives with the first event's last byte, not before.
    const auto first_event_end = kStream.find("\n\n") + 2;
    EXPECT_EQ(first_piece_feed, static_cast<int64_t>((first_event_end - 1) / piece)) << piece;
  }
}

TEST(CompletionStreamReader, UsageWithoutDetailsMeansNoCachedTokens) {
  CompletionStreamReader r;
  r.feed(
      "data: "
      "{\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7}}"
      "\n\n");
  ASSERT_TRUE(r.has_usage());
  EXPECT_EQ(r.cached_tokens(), 0);
  EXPECT_FALSE(r.done());
}

TEST(CompletionStreamReader, ReadsChatDeltas) {
  CompletionStreamReader r;
  EXPECT_EQ(
      r.feed(
          "data: "
          "{\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":"
          "\"assistant\"},\"finish_reason\":null}]}\n\n"
          "data: "
          "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n"
          "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
          "data: [DONE]\n\n"),
      1);
  EXPECT_EQ(r.text(), "Hi");
  EXPECT_EQ(r.finish_reason(), "stop");
  EXPECT_TRUE(r.done());
  EXPECT_EQ(r.error(), "");
}

TEST(CompletionStreamReader, FailuresAreReportedAndStopTheCount) {
  {
    CompletionStreamReader r;
    r.feed("data: {\"choices\":[{\"text\":\"a\"}]}\n\n");
    r.feed(
        "data: {\"error\":{\"message\":\"generation failed: out of "
        "KV\",\"type\":\"server_error\"}}\n\n");
    EXPECT_EQ(r.error(), "generation failed: out of KV");
    EXPECT_EQ(r.feed("data: {\"choices\":[{\"text\":\"b\"}]}\n\ndata: [DONE]\n\n"), 0);
    EXPECT_EQ(r.text(), "a");
    EXPECT_FALSE(r.done());
  }
  for (const char* bad : {"data: not json\n\n", "data: [1,2]\n\n", "data: {\"choices\": 3}\n\n",
                          "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":\"x\"}}\n\n"}) {
    CompletionStreamReader r;
    r.feed(bad);
    EXPECT_FALSE(r.error().empty()) << bad;
  }
  {  // nothing after [DONE] counts
    CompletionStreamReader r;
    r.feed("data: [DONE]\n\ndata: {\"choices\":[{\"text\":\"late\"}]}\n\n");
    EXPECT_TRUE(r.done());
    EXPECT_TRUE(r.text().empty());
  }
}

}  // namespace
}  // namespace tangram
