#include "grammar/output_matcher.h"

#include <algorithm>

namespace tangram {
namespace {

constexpr int32_t kMaxNumberDigits = 16;
static_assert(kMaxIntegerMagnitude == 9'999'999'999'999'999,
              "the schema's bound clamp is the matcher's digit cap");
constexpr int32_t kMaxExponentDigits = 2;  // 1e99 at most: every parser reads it as a double

bool is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Whether some integer typed by appending at most `digits_left` digits to the magnitude `prefix`
// (with its sign) lies in [lo, hi].
bool reachable(int64_t prefix, int32_t digits_left, bool negative, int64_t lo, int64_t hi) {
  int64_t scale = 1;
  for (int32_t j = 0; j <= digits_left; ++j, scale *= 10) {
    int64_t a = prefix * scale, b = a + scale - 1;
    if (negative) std::swap(a, b), a = -a, b = -b;
    if (a <= hi && b >= lo) return true;
  }
  return false;
}

// Phases of each kind of frame.
enum StringPhase : uint8_t { kStrOpen, kStrBody };
enum NumberPhase : uint8_t {
  kNumStart,
  kNumMinus,
  kNumZero,
  kNumInt,
  kNumDot,
  kNumFrac,
  kNumExp,
  kNumExpSign,
  kNumExpDigits
};
enum ObjectPhase : uint8_t {
  kObjOpen,
  kObjFirstKey,
  kObjKey,
  kObjKeyBody,
  kObjColon,
  kObjValue,
  kObjAfterValue
};
enum ArrayPhase : uint8_t { kArrOpen, kArrFirstItem, kArrItem, kArrAfterItem };

// The candidates of [lo, hi) (sorted, all sharing their first `pos` bytes) whose byte at `pos`
// is c: a sub-range, empty when none.
template <typename KeyOf>
std::pair<int32_t, int32_t> narrow(int32_t lo, int32_t hi, int32_t pos, uint8_t c, KeyOf key_of) {
  int32_t a = lo;
  const auto byte_at = [&](int32_t i) -> int {
    const std::string& k = key_of(i);
    return static_cast<size_t>(pos) < k.size() ? static_cast<uint8_t>(k[static_cast<size_t>(pos)])
                                               : -1;
  };
  while (a < hi && byte_at(a) != c) ++a;
  int32_t b = a;
  while (b < hi && byte_at(b) == c) ++b;
  return {a, b};
}

}  // namespace

OutputGrammar OutputGrammar::json_value(JsonSchemaGraph graph) {
  OutputGrammar g;
  const int32_t root = graph.root;
  g.graph = std::move(graph);
  g.segments.push_back(OutputSegment{true, "", root});
  g.end_at = 1;
  return g;
}

OutputMatcher::OutputMatcher(std::shared_ptr<const OutputGrammar> grammar)
    : grammar_(std::move(grammar)) {
  paths_.push_back(Path{});
}

OutputMatcher::Scan OutputMatcher::scan(StringScan& s, uint8_t c) {
  if (s.cont_left > 0) {
    if (c < s.cont_lo || c > s.cont_hi) return Scan::Reject;
    --s.cont_left;
    s.cont_lo = 0x80;
    s.cont_hi = 0xBF;
    return Scan::Char;
  }
  if (s.hex_left > 0) {
    if (!is_hex(c)) return Scan::Reject;
    // \uD800-\uDFFF: a surrogate, which parsers refuse unless paired; never written.
    if (s.hex_left == 4 && (c == 'd' || c == 'D'))
      s.escape = 2;  // the next digit must be 0-7
    else if (s.escape == 2 && !(c >= '0' && c <= '7'))
      return Scan::Reject;
    else
      s.escape = 0;
    --s.hex_left;
    return Scan::Char;
  }
  if (s.escape == 1) {
    s.escape = 0;
    if (c == 'u') {
      s.hex_left = 4;
      return Scan::Char;
    }
    return std::string_view("\"\\/bfnrt").find(static_cast<char>(c)) != std::string_view::npos
               ? Scan::Char
               : Scan::Reject;
  }
  if (c == '"') return Scan::Close;
  if (c == '\\') {
    s.escape = 1;
    return Scan::Char;
  }
  if (c < 0x20) return Scan::Reject;
  if (c < 0x80) return Scan::Char;
  // Well-formed UTF-8 lead bytes (RFC 3629): no overlong forms, surrogates or values past U+10FFFF.
  if (c >= 0xC2 && c <= 0xDF)
    s.cont_left = 1;
  else if (c >= 0xE0 && c <= 0xEF)
    s.cont_left = 2;
  else if (c >= 0xF0 && c <= 0xF4)
    s.cont_left = 3;
  else
    return Scan::Reject;
  if (c == 0xE0) s.cont_lo = 0xA0;
  if (c == 0xED) s.cont_hi = 0x9F;
  if (c == 0xF0) s.cont_lo = 0x90;
  if (c == 0xF4) s.cont_hi = 0x8F;
  return Scan::Char;
}

OutputMatcher::Scan OutputMatcher::step_cursor(StringCursor& cursor, uint8_t c) {
  const bool char_begins = cursor.scan == StringScan{};
  const Scan s = scan(cursor.scan, c);
  if (s != Scan::Char) return s;
  if (char_begins && cursor.max_length >= 0 && cursor.count >= cursor.max_length)
    return Scan::Reject;
  if (cursor.scan == StringScan{}) ++cursor.count;  // the character (or escape) is complete
  return Scan::Char;
}

std::optional<OutputMatcher::StringCursor> OutputMatcher::string_cursor() const {
  if (paths_.size() != 1 || paths_[0].frames.empty()) return std::nullopt;
  const Frame& f = paths_[0].frames.back();
  const JsonNode& n = node(f);
  if (n.kind != JsonNodeKind::String || f.phase != kStrBody) return std::nullopt;
  return StringCursor{f.str, f.count, n.max_length};
}

bool OutputMatcher::feed(std::string_view bytes) {
  for (char c : bytes)
    if (!feed_byte(static_cast<uint8_t>(c))) return false;
  return true;
}

bool OutputMatcher::feed_byte(uint8_t c) {
  next_.clear();
  for (Path& p : paths_) step(std::move(p), c, next_);
  // Alternatives that met again (anyOf branches with the same text so far) are followed once.
  paths_.clear();
  for (Path& p : next_)
    if (std::find(paths_.begin(), paths_.end(), p) == paths_.end()) paths_.push_back(std::move(p));
  next_.clear();  // keeps copies of the matcher (one per vocabulary walk step) small
  return !paths_.empty();
}

void OutputMatcher::advance_segment(Path& p) const {
  ++p.segment;
  p.pos = 0;
  if (p.segment == grammar_->segments.size() && grammar_->loop) p.segment = 0;
}

void OutputMatcher::pop(Path& p) const {
  p.frames.pop_back();
  if (p.frames.empty()) advance_segment(p);
}

bool OutputMatcher::completable(const Frame& f) const {
  const JsonNode& n = node(f);
  if (n.kind == JsonNodeKind::Literals)
    return f.lo < f.hi &&
           n.literals[static_cast<size_t>(f.lo)].size() == static_cast<size_t>(f.pos);
  if (n.kind == JsonNodeKind::Number || n.kind == JsonNodeKind::Integer) {
    const bool whole = f.phase == kNumZero || f.phase == kNumInt || f.phase == kNumFrac ||
                       f.phase == kNumExpDigits;
    const int64_t value = f.negative ? -f.value : f.value;
    return whole && (!n.bounded || (value >= n.min_value && value <= n.max_value));
  }
  return false;
}

bool OutputMatcher::key_available(const Frame& f) const {
  const JsonNode& n = node(f);
  if (n.additional >= 0) return true;
  const uint64_t all =
      n.properties.size() >= 64 ? ~uint64_t{0} : (uint64_t{1} << n.properties.size()) - 1;
  return (f.used & all) != all;
}

void OutputMatcher::step(Path p, uint8_t c, std::vector<Path>& out) const {
  if (!p.frames.empty()) return step_frame(std::move(p), c, out);
  const auto& segments = grammar_->segments;
  if (p.segment >= segments.size()) return;  // complete: nothing may follow
  const OutputSegment& seg = segments[p.segment];
  if (!seg.json) {
    if (p.pos >= seg.text.size() || static_cast<uint8_t>(seg.text[p.pos]) != c) return;
    p.ws_run = 0;
    if (++p.pos == seg.text.size()) advance_segment(p);
    out.push_back(std::move(p));
    return;
  }
  if (is_ws(c)) {  // before the value
    if (p.ws_run >= kMaxWhitespace) return;
    ++p.ws_run;
    out.push_back(std::move(p));
    return;
  }
  start_value(std::move(p), seg.choice, c, out);
}

void OutputMatcher::start_value(Path p, int32_t choice, uint8_t c, std::vector<Path>& out) const {
  if (p.frames.size() >= kMaxDepth) return;
  const std::vector<int32_t>& alternatives = grammar_->graph.choices[static_cast<size_t>(choice)];
  for (size_t i = 0; i < alternatives.size(); ++i) {
    Path q = i + 1 == alternatives.size() ? std::move(p) : p;
    Frame f;
    f.node = alternatives[i];
    const JsonNode& n = grammar_->graph.nodes[static_cast<size_t>(f.node)];
    if (n.kind == JsonNodeKind::Literals) f.hi = static_cast<int32_t>(n.literals.size());
    q.frames.push_back(f);
    step_frame(std::move(q), c, out);
  }
}

void OutputMatcher::step_frame(Path p, uint8_t c, std::vector<Path>& out) const {
  Frame& f = p.frames.back();
  switch (node(f).kind) {
    case JsonNodeKind::Literals:
      return step_literals(std::move(p), c, out);
    case JsonNodeKind::Number:
    case JsonNodeKind::Integer:
      return step_number(std::move(p), c, out);
    case JsonNodeKind::Object:
      return step_object(std::move(p), c, out);
    case JsonNodeKind::Array:
      return step_array(std::move(p), c, out);
    case JsonNodeKind::String:
      return step_string(std::move(p), c, out);
  }
}

void OutputMatcher::step_string(Path p, uint8_t c, std::vector<Path>& out) const {
  Frame& f = p.frames.back();
  const JsonNode& n = node(f);
  if (f.phase == kStrOpen) {
    if (c != '"') return;
    f.phase = kStrBody;
  } else {
    StringCursor cursor{f.str, f.count, n.max_length};
    const Scan s = step_cursor(cursor, c);
    if (s == Scan::Reject) return;
    if (s == Scan::Close) {
      if (f.count < n.min_length) return;
      pop(p);
    } else {
      f.str = cursor.scan;
      f.count = cursor.count;
    }
  }
  p.ws_run = 0;
  out.push_back(std::move(p));
}

void OutputMatcher::step_literals(Path p, uint8_t c, std::vector<Path>& out) const {
  Frame& f = p.frames.back();
  const std::vector<std::string>& lits = node(f).literals;
  const auto [lo, hi] = narrow(f.lo, f.hi, f.pos, c, [&](int32_t i) -> const std::string& {
    return lits[static_cast<size_t>(i)];
  });
  if (lo == hi) {  // c is not part of the literal: it may end here, and c belongs to what follows
    if (!completable(f)) return;
    pop(p);
    return step(std::move(p), c, out);
  }
  f.lo = lo;
  f.hi = hi;
  ++f.pos;
  if (hi - lo == 1 && lits[static_cast<size_t>(lo)].size() == static_cast<size_t>(f.pos)) pop(p);
  p.ws_run = 0;
  out.push_back(std::move(p));
}

bool OutputMatcher::bounded_number_step(const JsonNode& n, Frame& f, uint8_t c, uint8_t next) {
  if (next == kNumMinus) {
    f.negative = true;
    return n.min_value < 0;
  }
  if (next == kNumZero)
    return n.min_value <= 0 && n.max_value >= 0;  // "0" / "-0": nothing may follow
  f.value = f.value * 10 + (c - '0');
  return reachable(f.value, kMaxNumberDigits - f.count, f.negative, n.min_value, n.max_value);
}

void OutputMatcher::step_number(Path p, uint8_t c, std::vector<Path>& out) const {
  Frame& f = p.frames.back();
  const JsonNode& n = node(f);
  const Frame before = f;
  const bool real = n.kind == JsonNodeKind::Number && !n.bounded;  // bounded: integers only
  const bool digit = is_digit(c);
  uint8_t next = 0xFF;  // 0xFF: c does not continue the number
  switch (f.phase) {
    case kNumStart:
      if (c == '-') next = kNumMinus;
      [[fallthrough]];
    case kNumMinus:
      if (c == '0')
        next = kNumZero;
      else if (digit)
        next = kNumInt, f.count = 1;
      break;
    case kNumZero:
    case kNumInt:
      if (digit && f.phase == kNumInt && f.count < kMaxNumberDigits)
        next = kNumInt, ++f.count;
      else if (real && c == '.')
        next = kNumDot;
      else if (real && (c == 'e' || c == 'E'))
        next = kNumExp;
      break;
    case kNumDot:
    case kNumFrac:
      if (digit && (f.phase == kNumDot || f.count < kMaxNumberDigits))
        f.count = f.phase == kNumDot ? 1 : f.count + 1, next = kNumFrac;
      else if (f.phase == kNumFrac && (c == 'e' || c == 'E'))
        next = kNumExp;
      break;
    case kNumExp:
      if (c == '+' || c == '-') next = kNumExpSign;
      [[fallthrough]];
    case kNumExpSign:
    case kNumExpDigits:
      if (digit && (f.phase != kNumExpDigits || f.count < kMaxExponentDigits))
        f.count = f.phase == kNumExpDigits ? f.count + 1 : 1, next = kNumExpDigits;
      break;
    default:
      break;
  }
  if (next != 0xFF && n.bounded && !bounded_number_step(n, f, c, next)) {
    f = before;
    next = 0xFF;
  }
  if (next == 0xFF) {
    if (!completable(f)) return;
    pop(p);
    return step(std::move(p), c, out);
  }
  f.phase = next;
  p.ws_run = 0;
  out.push_back(std::move(p));
}

void OutputMatcher::step_object(Path p, uint8_t c, std::vector<Path>& out) const {
  Frame& f = p.frames.back();
  const JsonNode& n = node(f);
  const bool ws_phase = f.phase == kObjFirstKey || f.phase == kObjKey || f.phase == kObjColon ||
                        f.phase == kObjValue || f.phase == kObjAfterValue;
  if (ws_phase && is_ws(c)) {
    if (p.ws_run >= kMaxWhitespace) return;
    ++p.ws_run;
    out.push_back(std::move(p));
    return;
  }
  const bool complete = (f.used & n.required_mask) == n.required_mask;
  switch (f.phase) {
    case kObjOpen:
      if (c != '{') return;
      f.phase = kObjFirstKey;
      break;
    case kObjFirstKey:
    case kObjKey:
      if (c == '}' && f.phase == kObjFirstKey && complete) {
        pop(p);
        break;
      }
      if (c != '"' || !key_available(f)) return;
      f.phase = kObjKeyBody;
      f.pos = 0;
      f.lo = 0;
      f.hi = static_cast<int32_t>(n.properties.size());
      f.str = StringScan{};
      break;
    case kObjKeyBody:
      return step_key(std::move(p), c, out);
    case kObjColon:
      if (c != ':') return;
      f.phase = kObjValue;
      break;
    case kObjValue: {
      const int32_t choice =
          f.key >= 0 ? n.properties[static_cast<size_t>(f.key)].value : n.additional;
      f.phase = kObjAfterValue;
      return start_value(std::move(p), choice, c, out);
    }
    case kObjAfterValue:
      if (c == ',' && key_available(f))
        f.phase = kObjKey;
      else if (c == '}' && complete)
        pop(p);
      else
        return;
      break;
    default:
      return;
  }
  p.ws_run = 0;
  out.push_back(std::move(p));
}

void OutputMatcher::step_key(Path p, uint8_t c, std::vector<Path>& out) const {
  Frame& f = p.frames.back();
  const JsonNode& n = node(f);
  const auto key_of = [&](int32_t i) -> const std::string& {
    return n.properties[static_cast<size_t>(i)].key;
  };
  const auto used = [&](int32_t i) { return (f.used >> i) & 1U; };
  const Scan s = scan(f.str, c);
  if (s == Scan::Reject || c == '\\') return;  // keys are typed plainly: one spelling per name
  if (s == Scan::Close) {
    const bool exact = f.lo < f.hi && key_of(f.lo).size() == static_cast<size_t>(f.pos);
    if (exact && used(f.lo)) return;  // each key once
    if (exact)
      f.key = f.lo;
    else if (n.additional >= 0)
      f.key = -1;
    else
      return;
    if (f.key >= 0) f.used |= uint64_t{1} << f.key;
    f.phase = kObjColon;
  } else {
    const auto [lo, hi] = narrow(f.lo, f.hi, f.pos, c, key_of);
    bool declared = false;
    for (int32_t i = lo; i < hi && !declared; ++i) declared = !used(i);
    if (!declared && n.additional < 0) return;
    f.lo = lo;
    f.hi = hi;
    ++f.pos;
  }
  p.ws_run = 0;
  out.push_back(std::move(p));
}

void OutputMatcher::step_array(Path p, uint8_t c, std::vector<Path>& out) const {
  Frame& f = p.frames.back();
  const JsonNode& n = node(f);
  if (f.phase != kArrOpen && is_ws(c)) {
    if (p.ws_run >= kMaxWhitespace) return;
    ++p.ws_run;
    out.push_back(std::move(p));
    return;
  }
  const bool may_close = f.count >= n.min_items;
  const bool may_add = n.max_items < 0 || f.count < n.max_items;
  switch (f.phase) {
    case kArrOpen:
      if (c != '[') return;
      f.phase = kArrFirstItem;
      break;
    case kArrFirstItem:
    case kArrItem:
      if (c == ']' && f.phase == kArrFirstItem && may_close) {
        pop(p);
        break;
      }
      if (!may_add) return;
      ++f.count;
      f.phase = kArrAfterItem;
      return start_value(std::move(p), n.items, c, out);
    case kArrAfterItem:
      if (c == ',' && may_add)
        f.phase = kArrItem;
      else if (c == ']' && may_close)
        pop(p);
      else
        return;
      break;
    default:
      return;
  }
  p.ws_run = 0;
  out.push_back(std::move(p));
}

bool OutputMatcher::path_may_end(Path p) const {
  while (!p.frames.empty()) {
    if (!completable(p.frames.back())) return false;
    pop(p);
  }
  return p.segment == grammar_->end_at && p.pos == 0;
}

bool OutputMatcher::may_end() const {
  return std::any_of(paths_.begin(), paths_.end(), [&](const Path& p) { return path_may_end(p); });
}

bool OutputMatcher::must_end() const {
  if (paths_.empty() || grammar_->loop) return false;
  return std::all_of(paths_.begin(), paths_.end(), [&](const Path& p) {
    return p.frames.empty() && p.segment >= grammar_->segments.size();
  });
}

}  // namespace tangram
