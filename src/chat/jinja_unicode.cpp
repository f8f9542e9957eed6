#include "chat/jinja_unicode.h"

namespace tangram::jinja {

namespace {

constexpr char32_t kEscapeBase = 0xDC00;  // surrogateescape: invalid byte b -> U+DC00 + b

// Length of a valid UTF-8 sequence starting at s[i], or 0 when the bytes there are invalid.
size_t valid_sequence_length(std::string_view s, size_t i, char32_t* cp) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  size_t len = 0;
  char32_t value = 0;
  char32_t min_value = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, value = b0 & 0x1Fu, min_value = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, value = b0 & 0x0Fu, min_value = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, value = b0 & 0x07u, min_value = 0x10000;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    value = (value << 6) | (b & 0x3Fu);
  }
  // Overlong forms, surrogates and values past U+10FFFF are invalid UTF-8.
  if (value < min_value || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return 0;
  *cp = value;
  return len;
}

bool in_set(char32_t cp, const std::u32string& set) { return set.find(cp) != std::u32string::npos; }

}  // namespace

std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    char32_t cp = 0;
    const size_t len = valid_sequence_length(s, i, &cp);
    if (len == 0) {
      out.push_back(kEscapeBase + static_cast<unsigned char>(s[i]));
      ++i;
    } else {
      out.push_back(cp);
      i += len;
    }
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp >= kEscapeBase + 0x80 && cp <= kEscapeBase + 0xFF) {  // an escaped invalid byte
    out.push_back(static_cast<char>(cp - kEscapeBase));
  } else if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp <= 0x10FFFF) {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    append_utf8(out, 0xFFFD);
  }
}

std::string encode_utf8(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) append_utf8(out, cp);
  return out;
}

size_t count_code_points(std::string_view s) {
  size_t n = 0;
  size_t i = 0;
  while (i < s.size()) {
    char32_t cp = 0;
    const size_t len = valid_sequence_length(s, i, &cp);
    i += len == 0 ? 1 : len;
    ++n;
  }
  return n;
}

bool is_py_printable(char32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;  // Cc, NBSP, soft hyphen
  if (c < 0x600) return true;
  struct Range {
    char32_t lo, hi;
  };
  // Zs, Zl, Zp, Cf, Cs and Co ranges (the non-printable categories).
  static constexpr Range kNonPrintable[] = {
      {0x600, 0x605},     {0x61C, 0x61C},     {0x6DD, 0x6DD},     {0x70F, 0x70F},
      {0x890, 0x891},     {0x8E2, 0x8E2},     {0x1680, 0x1680},   {0x180E, 0x180E},
      {0x2000, 0x200F},   {0x2028, 0x202F},   {0x205F, 0x2064},   {0x2066, 0x206F},
      {0x3000, 0x3000},   {0xD800, 0xF8FF},   {0xFEFF, 0xFEFF},   {0xFFF9, 0xFFFB},
      {0x110BD, 0x110BD}, {0x110CD, 0x110CD}, {0x13430, 0x1343F}, {0x1BCA0, 0x1BCA3},
      {0x1D173, 0x1D17A}, {0xE0001, 0xE0001}, {0xE0020, 0xE007F}, {0xF0000, 0x10FFFF},
  };
  for (const Range& r : kNonPrintable)
    if (c >= r.lo && c <= r.hi) return false;
  return true;
}

bool is_py_space(char32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x1F:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  // Works on the bytes and decodes only the code points at the two edges, so stripping a long
  // message costs no more than its surrounding whitespace.
  const std::u32string set = chars ? decode_utf8(*chars) : std::u32string();
  auto strippable = [&](char32_t cp) { return chars ? in_set(cp, set) : is_py_space(cp); };
  size_t begin = 0;
  size_t end = s.size();
  if (left) {
    while (begin < end) {
      char32_t cp = 0;
      size_t len = valid_sequence_length(s, begin, &cp);
      if (len == 0) {
        cp = kEscapeBase + static_cast<unsigned char>(s[begin]);
        len = 1;
      }
      if (!strippable(cp)) break;
      begin += len;
    }
  }
  if (right) {
    while (end > begin) {
      // Start of the last code point: back over up to three continuation bytes.
      size_t start = end - 1;
      while (start > begin && end - start < 4 &&
             (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80)
        --start;
      char32_t cp = 0;
      const size_t len = valid_sequence_length(s, start, &cp);
      if (len != end - start) {  // not one valid sequence: the last byte stands alone
        start = end - 1;
        cp = kEscapeBase + static_cast<unsigned char>(s[start]);
      }
      if (!strippable(cp)) break;
      end = start;
    }
  }
  return std::string(s.substr(begin, end - begin));
}

std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      const size_t hit = s.find(*sep, start);
      if (hit == std::string_view::npos) break;
      parts.emplace_back(s.substr(start, hit - start));
      start = hit + sep->size();
    }
    parts.emplace_back(s.substr(start));
    return parts;
  }
  const std::u32string cps = decode_utf8(s);
  size_t i = 0;
  while (i < cps.size()) {
    while (i < cps.size() && is_py_space(cps[i])) ++i;
    if (i == cps.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      parts.push_back(encode_utf8(std::u32string_view(cps).substr(i)));  // the rest, as is
      break;
    }
    size_t j = i;
    while (j < cps.size() && !is_py_space(cps[j])) ++j;
    parts.push_back(encode_utf8(std::u32string_view(cps).substr(i, j - i)));
    i = j;
  }
  return parts;
}

std::vector<std::string> py_rsplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  if (maxsplit < 0) return py_split(s, sep, maxsplit);
  std::vector<std::string> reversed;
  if (sep) {
    size_t end = s.size();
    while (static_cast<int64_t>(reversed.size()) < maxsplit && end >= sep->size()) {
      const size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      reversed.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    reversed.emplace_back(s.substr(0, end));
  } else {
    const std::u32string cps = decode_utf8(s);
    size_t end = cps.size();
    while (end > 0) {
      while (end > 0 && is_py_space(cps[end - 1])) --end;
      if (end == 0) break;
      if (static_cast<int64_t>(reversed.size()) == maxsplit) {
        reversed.push_back(
            encode_utf8(std::u32string_view(cps).substr(0, end)));  // the rest, as is
        break;
      }
      size_t begin = end;
      while (begin > 0 && !is_py_space(cps[begin - 1])) --begin;
      reversed.push_back(encode_utf8(std::u32string_view(cps).substr(begin, end - begin)));
      end = begin;
    }
  }
  return {reversed.rbegin(), reversed.rend()};
}

std::vector<std::string> py_splitlines(std::string_view s) {
  const std::u32string cps = decode_utf8(s);
  std::vector<std::string> lines;
  size_t start = 0;
  size_t i = 0;
  while (i < cps.size()) {
    const char32_t c = cps[i];
    const bool is_break = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C ||
                          c == 0x1D || c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!is_break) {
      ++i;
      continue;
    }
    lines.push_back(encode_utf8(std::u32string_view(cps).substr(start, i - start)));
    i += (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ? 2 : 1;
    start = i;
  }
  if (start < cps.size()) lines.push_back(encode_utf8(std::u32string_view(cps).substr(start)));
  return lines;
}

Result<std::string> py_replace(std::string_view s, std::string_view from, std::string_view to,
                               int64_t count, size_t max_bytes) {
  std::string out;
  // Checked before each append, so the string never grows past the limit.
  const auto too_long = [&](size_t more) {
    return more > max_bytes || out.size() > max_bytes - more;
  };
  const auto fail = [&] { return make_error("replace() result exceeds {} bytes", max_bytes); };
  if (from.empty()) {
    // Python inserts `to` between code points and at both ends.
    const std::u32string cps = decode_utf8(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        if (too_long(to.size() + 4)) return fail();
        out += to;
        ++done;
      }
      if (i < cps.size()) append_utf8(out, cps[i]);
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(from, start);
    if (hit == std::string_view::npos) break;
    if (too_long(hit - start + to.size())) return fail();
    out.append(s.substr(start, hit - start));
    out.append(to);
    start = hit + from.size();
    ++done;
  }
  if (too_long(s.size() - start)) return fail();
  out.append(s.substr(start));
  return out;
}

char32_t py_to_upper(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if (c == 0xB5) return 0x39C;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c >= 0x100 && c <= 0x17F) {
    if (c == 0x131) return 'I';
    if (c == 0x17F) return 'S';
    const bool odd_lower = (c <= 0x137) || (c >= 0x14A && c <= 0x177);
    const bool even_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_lower && (c & 1) && c != 0x131) return c - 1;
    if (even_lower && !(c & 1)) return c - 1;
    return c;
  }
  if (c >= 0x3B1 && c <= 0x3C9) return c == 0x3C2 ? 0x3A3 : c - 32;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 37;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 63;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

char32_t py_to_lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c >= 0x100 && c <= 0x17F) {
    if (c == 0x130 || c == 0x131 || c == 0x138 || c == 0x149 || c == 0x17F) return c;
    if (c == 0x178) return 0xFF;
    const bool even_upper = (c <= 0x137) || (c >= 0x14A && c <= 0x177);
    const bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (even_upper && !(c & 1)) return c + 1;
    if (odd_upper && (c & 1)) return c + 1;
    return c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 37;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 63;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

bool py_is_cased_letter(char32_t c) {
  return py_to_upper(c) != c || py_to_lower(c) != c || c == 0xDF;
}

std::string py_upper(std::string_view s) {
  std::u32string cps = decode_utf8(s);
  for (char32_t& c : cps) c = py_to_upper(c);
  return encode_utf8(cps);
}

std::string py_lower(std::string_view s) {
  std::u32string cps = decode_utf8(s);
  for (char32_t& c : cps) c = py_to_lower(c);
  return encode_utf8(cps);
}

std::string py_title(std::string_view s) {
  std::u32string cps = decode_utf8(s);
  bool previous_cased = false;
  for (char32_t& c : cps) {
    c = previous_cased ? py_to_lower(c) : py_to_upper(c);
    previous_cased = py_is_cased_letter(c);
  }
  return encode_utf8(cps);
}

std::string py_capitalize(std::string_view s) {
  std::u32string cps = decode_utf8(s);
  for (size_t i = 0; i < cps.size(); ++i)
    cps[i] = i == 0 ? py_to_upper(cps[i]) : py_to_lower(cps[i]);
  return encode_utf8(cps);
}

}  // namespace tangram::jinja
