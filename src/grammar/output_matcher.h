// A byte-level pushdown matcher for constrained output: literal text and JSON values that a
// compiled schema (json_schema.h) describes, in sequence, e.g. `<tool_call>\n` + a call object
// + `\n</tool_call>`. feed() takes the output's bytes as they come and refuses the first byte no
// valid output could continue with, so a prefix it accepts always extends to a valid output.
//
// JSON as matched: RFC 8259 written compactly, with at most kMaxWhitespace (none) whitespace
// bytes between tokens, as clients see JSON from other servers (whitespace inside strings is
// text, and free), strings of well-formed UTF-8
// without lone-surrogate escapes, numbers with at most 16 digits in the integer part and in the
// fraction and 2 in the exponent (a bounded number: an integer in its bounds, digit by digit only
// while some value in them can still be typed), string lengths counted in code points, nesting at
// most kMaxDepth deep, object keys in any order, declared ones once each (undeclared keys of an
// open object are not checked for repeats). These bounds keep a model that rambles from filling its
// budget with blanks or digits; every text they admit is still valid JSON.
//
// A schema's anyOf makes the matcher nondeterministic: it follows every alternative still
// possible (a set of paths, each with its own stack) and drops those a byte refutes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/json_schema.h"

namespace tangram {

struct OutputSegment {
  bool json = false;
  std::string text;     // literal text (json = false)
  int32_t choice = -1;  // the value's choice in the graph (json = true)
};

struct OutputGrammar {
  JsonSchemaGraph graph;
  std::vector<OutputSegment> segments;
  // The output may end on reaching this segment (segments.size(): after the last one).
  size_t end_at = 0;
  // After the last segment, start again from the first (repeated tool calls).
  bool loop = false;

  // The whole output is one JSON value of `graph`'s root choice.
  static OutputGrammar json_value(JsonSchemaGraph graph);
};

class OutputMatcher {
 public:
  static constexpr int kMaxWhitespace = 0;
  static constexpr size_t kMaxDepth = 48;

  explicit OutputMatcher(std::shared_ptr<const OutputGrammar> grammar);

  // Advances over bytes; false (and the matcher is dead) when a byte cannot continue any
  // valid output.
  bool feed(std::string_view bytes);
  bool feed_byte(uint8_t c);
  bool dead() const { return paths_.empty(); }
  // What has been fed is a whole valid output.
  bool may_end() const;
  // ... and no byte may follow it.
  bool must_end() const;

  // String-body scanner: escapes and UTF-8 well-formedness.
  struct StringScan {
    uint8_t escape = 0;      // 1: after a backslash
    uint8_t hex_left = 0;    // \u digits still expected
    uint8_t cont_left = 0;   // UTF-8 continuation bytes still expected
    uint8_t cont_lo = 0x80;  // the next continuation byte's range
    uint8_t cont_hi = 0xBF;
    bool operator==(const StringScan&) const = default;
  };
  enum class Scan { Char, Close, Reject };

  // Inside a JSON string's body, on the matcher's only path, all that the next bytes depend on
  // until the string closes: a vocabulary walk steps this instead of copying the matcher.
  struct StringCursor {
    StringScan scan;
    int32_t count = 0;        // characters so far
    int32_t max_length = -1;  // the schema's bound (-1: none)
  };
  std::optional<StringCursor> string_cursor() const;
  // One byte of the body: Char advances the cursor exactly as feed_byte() advances the matcher;
  // Close (the closing quote: what follows depends on the rest of the matcher) and Reject leave
  // it unspecified.
  static Scan step_cursor(StringCursor& cursor, uint8_t c);

 private:
  static Scan scan(StringScan& s, uint8_t c);

  struct Frame {
    int32_t node = 0;
    uint8_t phase = 0;
    StringScan str;
    int32_t pos = 0, lo = 0, hi = 0;  // literal or key: bytes matched, candidates still matching
    int32_t count =
        0;  // array: items begun; string: characters; number: digits in the current part
    int64_t value = 0;      // bounded number: the integer part's magnitude so far
    bool negative = false;  // bounded number: after a minus sign
    int32_t key = -1;       // object: the property being valued (-1: an additional one)
    uint64_t used = 0;      // object: properties given
    bool operator==(const Frame&) const = default;
  };
  struct Path {
    uint32_t segment = 0;
    uint32_t pos = 0;  // bytes of a literal segment matched
    int32_t ws_run = 0;
    std::vector<Frame> frames;
    bool operator==(const Path&) const = default;
  };

  void step(Path p, uint8_t c, std::vector<Path>& out) const;
  void step_frame(Path p, uint8_t c, std::vector<Path>& out) const;
  void step_literals(Path p, uint8_t c, std::vector<Path>& out) const;
  void step_number(Path p, uint8_t c, std::vector<Path>& out) const;
  void step_string(Path p, uint8_t c, std::vector<Path>& out) const;
  // A bounded number's next byte (already taken into f as phase `next`): whether some value in
  // the bounds still begins with what is then typed.
  static bool bounded_number_step(const JsonNode& n, Frame& f, uint8_t c, uint8_t next);
  void step_object(Path p, uint8_t c, std::vector<Path>& out) const;
  void step_key(Path p, uint8_t c, std::vector<Path>& out) const;
  void step_array(Path p, uint8_t c, std::vector<Path>& out) const;
  // A value of `choice` starts with byte c: one path per alternative.
  void start_value(Path p, int32_t choice, uint8_t c, std::vector<Path>& out) const;
  // The top frame is complete: pop it (a finished value may complete its segment).
  void pop(Path& p) const;
  void advance_segment(Path& p) const;
  // Whether the top frame may end before byte c (a number or literal that is whole).
  bool completable(const Frame& f) const;
  bool key_available(const Frame& f) const;
  bool path_may_end(Path p) const;
  const JsonNode& node(const Frame& f) const {
    return grammar_->graph.nodes[static_cast<size_t>(f.node)];
  }

  std::shared_ptr<const OutputGrammar> grammar_;
  std::vector<Path> paths_;
  std::vector<Path> next_;  // scratch for feed_byte
};

}  // namespace tangram
