#include "runtime/stop_strings.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace tangram {
namespace {

struct Outcome {
  std::string text;  // everything emitted (including flush when no stop)
  bool stopped = false;
  int stop_index = -1;
  bool operator==(const Outcome&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  return os << "{text='" << o.text << "' stopped=" << o.stopped << " index=" << o.stop_index << "}";
}

// Plain reference on the whole text: scan end positions left to right; the first end position
// where any stop string ends wins, and among those the longest one (then the lowest index).
Outcome reference(const std::string& text, const std::vector<std::string>& stops) {
  for (size_t end = 1; end <= text.size(); ++end) {
    int best = -1;
    for (size_t i = 0; i < stops.size(); ++i) {
      const std::string& s = stops[i];
      if (s.empty() || s.size() > end || text.compare(end - s.size(), s.size(), s) != 0) continue;
      if (best < 0 || s.size() > stops[static_cast<size_t>(best)].size())
        best = static_cast<int>(i);
    }
    if (best >= 0) {
      return {text.substr(0, end - stops[static_cast<size_t>(best)].size()), true, best};
    }
  }
  return {text, false, -1};
}

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    size_t len = b < 0x80           ? 1
                 : (b >> 5) == 0x6  ? 2
                 : (b >> 4) == 0xE  ? 3
                 : (b >> 3) == 0x1E ? 4
                                    : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

// Feeds text cut at `cuts` (sorted byte offsets) and collects the outcome. Checks on the way:
// nothing comes out after a stop, and (when `utf8` is set) every emitted chunk is valid UTF-8.
Outcome run(const std::string& text, const std::vector<std::string>& stops,
            const std::vector<size_t>& cuts, bool utf8) {
  StopStringMatcher matcher(stops);
  Outcome out;
  size_t begin = 0;
  std::vector<size_t> bounds = cuts;
  bounds.push_back(text.size());
  for (const size_t end : bounds) {
    const StopStringMatcher::Step step =
        matcher.feed(std::string_view(text).substr(begin, end - begin));
    begin = end;
    if (out.stopped) {
      EXPECT_TRUE(step.text.empty() && !step.stopped) << "output after a stop";
      continue;
    }
    if (utf8) {
      EXPECT_TRUE(valid_utf8(step.text)) << "chunk '" << step.text << "'";
    }
    out.text += step.text;
    if (step.stopped) {
      out.stopped = true;
      out.stop_index = step.stop_index;
      EXPECT_EQ(matcher.stop_index(), step.stop_index);
    }
  }
  const std::string rest = matcher.flush();
  if (out.stopped) {
    EXPECT_TRUE(rest.empty());
  }
  out.text += rest;
  return out;
}

// Every split into two and three pieces, and byte by byte, must give the whole-text outcome.
void check_all_splits(const std::string& text, const std::vector<std::string>& stops,
                      bool utf8 = false) {
  const Outcome expected = reference(text, stops);
  EXPECT_EQ(run(text, stops, {}, utf8), expected) << "whole text";
  for (size_t a = 0; a <= text.size(); ++a) {
    EXPECT_EQ(run(text, stops, {a}, utf8), expected) << "cut at " << a;
    for (size_t b = a; b <= text.size(); ++b) {
      EXPECT_EQ(run(text, stops, {a, b}, utf8), expected) << "cuts at " << a << ", " << b;
    }
  }
  std::vector<size_t> every_byte;
  for (size_t i = 1; i < text.size(); ++i) every_byte.push_back(i);
  EXPECT_EQ(run(text, stops, every_byte, utf8), expected) << "byte by byte";
}

TEST(StopStrings, ReferenceBehavesAsSpecified) {
  // Guards the oracle itself with hand-written answers.
  EXPECT_EQ(reference("Hello world!", {"world"}), (Outcome{"Hello ", true, 0}));
  EXPECT_EQ(reference("xabcde", {"abcd", "bc"}), (Outcome{"xa", true, 1}));
  EXPECT_EQ(reference("zabc", {"bc", "abc"}), (Outcome{"z", true, 1}));
  EXPECT_EQ(reference("abc", {"x"}), (Outcome{"abc", false, -1}));
}

TEST(StopStrings, SingleStopAtEverySplit) {
  check_all_splits("Hello world! Goodbye", {"world"});
  check_all_splits("User: hi\nAssistant: hello\nUser:", {"\nUser:"});
}

TEST(StopStrings, StopAtStartAndAtEnd) {
  check_all_splits("STOPrest", {"STOP"});
  check_all_splits("text then STOP", {"STOP"});
  EXPECT_EQ(run("STOP", {"STOP"}, {}, false), (Outcome{"", true, 0}));
}

TEST(StopStrings, OverlappingStopStrings) {
  check_all_splits("xabcde", {"abcd", "bc"});  // "bc" completes first
  check_all_splits("zabc", {"ab", "abc"});     // "ab" completes first
  check_all_splits("zabc", {"bc", "abc"});     // same end: the longer wins
  check_all_splits("the end</s><|im_end|>", {"<|im_end|>", "</s>", "end"});
  check_all_splits("aaaa", {"aa", "a"});
  check_all_splits("yx", {"x", "x"});  // duplicates: the first index
}

TEST(StopStrings, PartialMatchesThatFailAreReleased) {
  check_all_splits("a </b> and </s", {"</s>"});  // never completes: all text comes out
  check_all_splits("aaab", {"aab"});             // restart inside a failed partial match
  check_all_splits("abababc", {"ababc"});
  check_all_splits("abcabd", {"abd"});
  check_all_splits("ab ab abx", {"abc", "abd"});
}

TEST(StopStrings, HoldsBackOnlyWhatCouldStillMatch) {
  StopStringMatcher matcher({"world", "wxyz"});
  StopStringMatcher::Step step = matcher.feed("Hello wor");
  EXPECT_EQ(step.text, "Hello ");
  EXPECT_FALSE(step.stopped);
  EXPECT_EQ(matcher.held(), 3u);
  step = matcher.feed("m");  // "worm": no longer a prefix of either stop string
  EXPECT_EQ(step.text, "worm");
  EXPECT_EQ(matcher.held(), 0u);
  step = matcher.feed("s w");
  EXPECT_EQ(step.text, "s ");
  step = matcher.feed("orld and more");
  EXPECT_TRUE(step.stopped);
  EXPECT_EQ(step.text, "");
  EXPECT_EQ(step.stop_index, 0);
  EXPECT_TRUE(matcher.feed("ignored").text.empty());
  EXPECT_EQ(matcher.flush(), "");
}

TEST(StopStrings, NoStopStringsPassEverythingThrough) {
  StopStringMatcher matcher({});
  EXPECT_EQ(matcher.feed("abc").text, "abc");
  EXPECT_EQ(matcher.held(), 0u);
  check_all_splits("plain text", {});
  check_all_splits("abc", {""});       // empty stop strings are ignored
  check_all_splits("abc", {"", "b"});  // ... and indices still refer to the given list
  EXPECT_EQ(reference("abc", {"", "b"}).stop_index, 1);
}

TEST(StopStrings, Utf8MultiByteText) {
  const std::string text = "Grüße, 世界! 🙂 fin";
  check_all_splits(text, {"世界"}, true);
  check_all_splits(text, {"🙂"}, true);
  check_all_splits(text, {"ße"}, true);
  check_all_splits(text, {"世X"}, true);  // shares a 3-byte prefix with "世界", never matches
  check_all_splits("😀😁", {"😁"}, true);    // shares the first three bytes with the text's emoji
}

TEST(StopStrings, IncompleteUtf8IsHeldUntilComplete) {
  StopStringMatcher matcher({});
  // U+20AC is E2 82 AC: fed one byte at a time, it comes out whole.
  EXPECT_EQ(matcher.feed("a\xE2").text, "a");
  EXPECT_EQ(matcher.feed("\x82").text, "");
  EXPECT_EQ(matcher
                .feed("\xAC"
                      "b")
                .text,
            "\xE2\x82\xAC"
            "b");
  // A truncated character at the very end still comes out on flush.
  EXPECT_EQ(matcher.feed("\xF0\x9F").text, "");
  EXPECT_EQ(matcher.flush(), "\xF0\x9F");
  // Malformed bytes are not held (they can never be completed).
  EXPECT_EQ(matcher.feed("x\x80").text, "x\x80");
}

TEST(StopStrings, RandomTextsMatchReference) {
  // Small alphabet so that partial and overlapping matches are frequent.
  std::mt19937 rng(2024);
  const auto random_string = [&](size_t min_len, size_t max_len) {
    std::uniform_int_distribution<size_t> len(min_len, max_len);
    std::uniform_int_distribution<int> letter(0, 2);
    std::string s(len(rng), 'a');
    for (char& c : s) c = static_cast<char>('a' + letter(rng));
    return s;
  };
  for (int trial = 0; trial < 300; ++trial) {
    const std::string text = random_string(0, 30);
    std::vector<std::string> stops;
    const int n_stops = trial % 4;
    for (int i = 0; i < n_stops; ++i) stops.push_back(random_string(1, 5));
    const Outcome expected = reference(text, stops);
    std::uniform_int_distribution<size_t> position(0, text.size());
    for (int split = 0; split < 20; ++split) {
      std::vector<size_t> cuts = {position(rng), position(rng), position(rng)};
      std::sort(cuts.begin(), cuts.end());
      ASSERT_EQ(run(text, stops, cuts, false), expected) << "text '" << text << "' trial " << trial;
    }
  }
}

}  // namespace
}  // namespace tangram
