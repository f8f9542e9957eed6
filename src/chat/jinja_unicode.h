// Python-compatible text helpers for the Jinja interpreter: templates index, slice, strip and
// split strings by code point, and Python's notion of whitespace is wider than ASCII.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace tangram::jinja {

// Decodes UTF-8 to code points. Invalid bytes map to U+DC80..U+DCFF (Python's surrogateescape),
// so encode_utf8(decode_utf8(s)) == s for every byte string.
std::u32string decode_utf8(std::string_view s);
std::string encode_utf8(std::u32string_view cps);
void append_utf8(std::string& out, char32_t cp);
// Number of code points (what Python's len() gives).
size_t count_code_points(std::string_view s);

// str.isprintable() for one code point (what repr() leaves unescaped). Unassigned code points
// count as printable (no Unicode database here).
bool is_py_printable(char32_t cp);
// str.isspace() for one code point.
bool is_py_space(char32_t cp);

// str.strip/lstrip/rstrip: with `chars` null, strip Python whitespace; else strip any code point
// contained in *chars.
std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right);
// str.split(): sep null splits on runs of whitespace and drops empty parts; maxsplit < 0 means
// no limit.
std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit);
// str.rsplit() with the same conventions, splitting from the right.
std::vector<std::string> py_rsplit(std::string_view s, const std::string* sep, int64_t maxsplit);
// str.splitlines() (without keepends).
std::vector<std::string> py_splitlines(std::string_view s);
// str.replace(old, new, count); count < 0 replaces all. A result over max_bytes is an Error: a
// few replacements of a long string can ask for gigabytes ("a" * 1e5).replace("a", "b" * 1e5).
Result<std::string> py_replace(std::string_view s, std::string_view from, std::string_view to,
                               int64_t count, size_t max_bytes);

// Case mapping for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (other scripts unchanged).
char32_t py_to_upper(char32_t cp);
char32_t py_to_lower(char32_t cp);
bool py_is_cased_letter(char32_t cp);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
// str.title(): upper-case the first cased letter after a non-letter, lower-case the rest.
std::string py_title(std::string_view s);
// str.capitalize(): first code point upper, the rest lower.
std::string py_capitalize(std::string_view s);

}  // namespace tangram::jinja
