#include "chat/jinja_lexer.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>

#include "chat/jinja_unicode.h"

namespace tangram::jinja {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Longest operators first so that "//" wins over "/".
constexpr std::array<std::string_view, 25> kOperators = {
    "//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
    "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ","};

// Jinja2 normalizes every newline sequence to "\n" and, unless keep_trailing_newline, drops one
// trailing newline before lexing.
std::string normalize_newlines(std::string_view source, bool keep_trailing_newline) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  Lexer(std::string source, const LexerOptions& options) : src_(std::move(source)), opt_(options) {}

  Result<std::vector<Token>> run() {
    size_t pos = 0;
    while (pos < src_.size()) {
      const size_t start = find_tag_start(pos);
      if (start == std::string::npos) {
        emit_data(src_.substr(pos), pos);
        break;
      }
      const char kind = src_[start + 1];  // '{', '%' or '#'
      size_t inner = start + 2;
      char sign = 0;
      if (inner < src_.size() && (src_[inner] == '-' || src_[inner] == '+')) sign = src_[inner++];
      std::string text = src_.substr(pos, start - pos);
      emit_data(apply_left_control(std::move(text), sign, kind != '{'), pos);

      if (kind == '#') {
        TG_ASSIGN(pos, skip_comment(start, inner));
        continue;
      }
      if (kind == '%') {
        const size_t raw_body = match_raw_begin(inner);
        if (raw_body != std::string::npos) {
          TG_ASSIGN(pos, lex_raw(start, raw_body));
          continue;
        }
      }
      TG_ASSIGN(pos, lex_tag(kind == '%', start, inner));
    }
    tokens_.push_back(Token{TokenType::kEnd, "", 0, 0, line_at(src_.size())});
    return std::move(tokens_);
  }

 private:
  // 1-based line of byte `pos`; positions are requested in increasing order.
  int line_at(size_t pos) {
    for (; counted_pos_ < pos && counted_pos_ < src_.size(); ++counted_pos_)
      if (src_[counted_pos_] == '\n') ++counted_line_;
    return counted_line_;
  }

  size_t find_tag_start(size_t pos) const {
    for (size_t i = src_.find('{', pos); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return std::string::npos;
  }

  // Position after Python-regex whitespace (\s*) starting at pos.
  size_t skip_space(size_t pos) const {
    while (pos < src_.size()) {
      const auto c = static_cast<unsigned char>(src_[pos]);
      if (c < 0x80) {
        if (!is_py_space(c)) break;
        ++pos;
        continue;
      }
      // Non-ASCII whitespace (NBSP, ideographic space...) is whitespace to Python's \s too.
      size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
      if (pos + len > src_.size()) break;
      const std::u32string cp = decode_utf8(std::string_view(src_).substr(pos, len));
      if (cp.size() != 1 || !is_py_space(cp[0])) break;
      pos += len;
    }
    return pos;
  }

  void note_consumed_until(size_t pos) { line_starting_ = pos > 0 && src_[pos - 1] == '\n'; }

  std::string apply_left_control(std::string text, char sign, bool block_like) const {
    if (sign == '-') return py_strip(text, nullptr, false, true);
    if (sign == '+' || !block_like || !opt_.lstrip_blocks) return text;
    const size_t newline = text.rfind('\n');
    const size_t line_begin = newline == std::string::npos ? 0 : newline + 1;
    if (line_begin == 0 && !line_starting_) return text;
    for (size_t i = line_begin; i < text.size(); ++i)
      if (text[i] != ' ' && text[i] != '\t') return text;
    text.resize(line_begin);
    return text;
  }

  void emit_data(std::string text, size_t pos) {
    if (text.empty()) return;
    tokens_.push_back(Token{TokenType::kData, std::move(text), 0, 0, line_at(pos)});
  }

  Result<size_t> skip_comment(size_t start, size_t inner) {
    for (size_t h = src_.find("#}", inner); h != std::string::npos; h = src_.find("#}", h + 1)) {
      size_t after = h + 2;
      if (h > inner && src_[h - 1] == '-') {
        after = skip_space(after);
      } else if (h > inner && src_[h - 1] == '+') {
        // keep what follows
      } else if (opt_.trim_blocks && after < src_.size() && src_[after] == '\n') {
        ++after;
      }
      note_consumed_until(after);
      return after;
    }
    return make_error("line {}: unterminated comment (missing '#}}')", line_at(start));
  }

  // If `inner` (just after "{%" and its sign) starts "raw %}", returns where the raw text begins.
  size_t match_raw_begin(size_t inner) const {
    size_t p = skip_space(inner);
    if (src_.compare(p, 3, "raw") != 0) return std::string::npos;
    p = skip_space(p + 3);
    if (src_.compare(p, 3, "-%}") == 0) return skip_space(p + 3);
    if (src_.compare(p, 2, "%}") == 0) return p + 2;
    return std::string::npos;
  }

  Result<size_t> lex_raw(size_t start, size_t body) {
    for (size_t h = src_.find("{%", body); h != std::string::npos; h = src_.find("{%", h + 1)) {
      size_t p = h + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      p = skip_space(p);
      if (src_.compare(p, 6, "endraw") != 0) continue;
      p = skip_space(p + 6);
      size_t after = 0;
      if (src_.compare(p, 3, "+%}") == 0) {
        after = p + 3;
      } else if (src_.compare(p, 3, "-%}") == 0) {
        after = skip_space(p + 3);
      } else if (src_.compare(p, 2, "%}") == 0) {
        after = p + 2;
        if (opt_.trim_blocks && after < src_.size() && src_[after] == '\n') ++after;
      } else {
        continue;
      }
      line_starting_ = body > 0 && src_[body - 1] == '\n';
      emit_data(apply_left_control(src_.substr(body, h - body), sign, true), body);
      note_consumed_until(after);
      return after;
    }
    return make_error("line {}: missing '{{% endraw %}}' for this raw block", line_at(start));
  }

  // Lexes one {{ ... }} or {% ... %} tag starting at `start`; returns the position after it.
  Result<size_t> lex_tag(bool is_block, size_t start, size_t inner) {
    tokens_.push_back(Token{is_block ? TokenType::kBlockBegin : TokenType::kVariableBegin,
                            is_block ? "{%" : "{{", 0, 0, line_at(start)});
    std::string balance;  // open brackets, innermost last
    size_t p = inner;
    while (true) {
      p = skip_space(p);
      if (p >= src_.size())
        return make_error("line {}: unexpected end of template, the {} opened here is not closed",
                          line_at(start), is_block ? "'{%'" : "'{{'");
      if (balance.empty()) {
        const size_t after = match_tag_end(is_block, p);
        if (after != std::string::npos) {
          tokens_.push_back(Token{is_block ? TokenType::kBlockEnd : TokenType::kVariableEnd,
                                  is_block ? "%}" : "}}", 0, 0, line_at(p)});
          note_consumed_until(after);
          return after;
        }
      }
      TG_ASSIGN(p, lex_token(p, balance));
    }
  }

  size_t match_tag_end(bool is_block, size_t p) const {
    if (is_block) {
      if (src_.compare(p, 3, "-%}") == 0) return skip_space(p + 3);
      if (src_.compare(p, 3, "+%}") == 0) return p + 3;
      if (src_.compare(p, 2, "%}") == 0) {
        size_t after = p + 2;
        if (opt_.trim_blocks && after < src_.size() && src_[after] == '\n') ++after;
        return after;
      }
    } else {
      if (src_.compare(p, 3, "-}}") == 0) return skip_space(p + 3);
      if (src_.compare(p, 2, "}}") == 0) return p + 2;
    }
    return std::string::npos;
  }

  Result<size_t> lex_token(size_t p, std::string& balance) {
    const char c = src_[p];
    const int line = line_at(p);
    if (c == '\'' || c == '"') return lex_string(p);
    if (is_digit(c)) return lex_number(p);
    if (is_name_start(c)) {
      size_t e = p + 1;
      while (e < src_.size() && is_name_char(src_[e])) ++e;
      tokens_.push_back(Token{TokenType::kName, src_.substr(p, e - p), 0, 0, line});
      return e;
    }
    for (std::string_view op : kOperators) {
      if (src_.compare(p, op.size(), op) != 0) continue;
      if (op == "(" || op == "[" || op == "{") {
        balance.push_back(op[0]);
      } else if (op == ")" || op == "]" || op == "}") {
        const char open = op == ")" ? '(' : op == "]" ? '[' : '{';
        if (balance.empty() || balance.back() != open)
          return make_error("line {}: unexpected '{}'", line, op);
        balance.pop_back();
      }
      tokens_.push_back(Token{TokenType::kOperator, std::string(op), 0, 0, line});
      return p + op.size();
    }
    // Name the whole code point (never a lone byte of one) so the message stays valid UTF-8.
    const std::u32string cp =
        decode_utf8(std::string_view(src_).substr(p, std::min<size_t>(4, src_.size() - p)));
    std::string shown;
    append_utf8(shown, cp.empty() ? U'?' : cp[0]);
    return make_error("line {}: unexpected character '{}' (U+{:04X}) inside a tag", line, shown,
                      static_cast<uint32_t>(cp.empty() ? 0 : cp[0]));
  }

  // A Python string literal; escapes follow Python's unicode-escape codec, as Jinja2 uses.
  Result<size_t> lex_string(size_t p) {
    const char quote = src_[p];
    const int line = line_at(p);
    std::string value;
    size_t i = p + 1;
    while (true) {
      if (i >= src_.size()) return make_error("line {}: unterminated string literal", line);
      const char c = src_[i];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++i;
        continue;
      }
      if (i + 1 >= src_.size()) return make_error("line {}: unterminated string literal", line);
      const char e = src_[i + 1];
      i += 2;
      switch (e) {
        case '\n':
          break;  // line continuation
        case '\\':
          value += '\\';
          break;
        case '\'':
          value += '\'';
          break;
        case '"':
          value += '"';
          break;
        case 'a':
          value += '\a';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'n':
          value += '\n';
          break;
        case 'r':
          value += '\r';
          break;
        case 't':
          value += '\t';
          break;
        case 'v':
          value += '\v';
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (size_t k = 0; k < digits; ++k, ++i) {
            const char h = i < src_.size() ? src_[i] : '\0';
            int d = -1;
            if (h >= '0' && h <= '9')
              d = h - '0';
            else if (h >= 'a' && h <= 'f')
              d = h - 'a' + 10;
            else if (h >= 'A' && h <= 'F')
              d = h - 'A' + 10;
            if (d < 0)
              return make_error("line {}: truncated \\{} escape in string literal", line, e);
            cp = cp * 16 + static_cast<uint32_t>(d);
          }
          if (cp > 0x10FFFF) return make_error("line {}: \\U escape out of range", line);
          append_utf8(value, cp);
          break;
        }
        case 'N':
          return make_error("line {}: \\N{{...}} escapes are not supported", line);
        default:
          if (e >= '0' && e <= '7') {  // up to three octal digits
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7'; ++k, ++i)
              cp = cp * 8 + static_cast<uint32_t>(src_[i] - '0');
            append_utf8(value, cp);
          } else {  // unknown escapes stay as written
            value += '\\';
            value += e;
          }
      }
    }
    tokens_.push_back(Token{TokenType::kString, std::move(value), 0, 0, line});
    return i + 1;
  }

  // Digits with single underscores between them ((\d+_)*\d+); returns the end or npos.
  size_t scan_digits(size_t p) const {
    if (p >= src_.size() || !is_digit(src_[p])) return std::string::npos;
    size_t e = p;
    while (e < src_.size()) {
      if (is_digit(src_[e])) {
        ++e;
      } else if (src_[e] == '_' && e + 1 < src_.size() && is_digit(src_[e + 1])) {
        ++e;
      } else {
        break;
      }
    }
    return e;
  }

  size_t scan_exponent(size_t p) const {
    if (p >= src_.size() || (src_[p] != 'e' && src_[p] != 'E')) return std::string::npos;
    ++p;
    if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
    return scan_digits(p);
  }

  Result<size_t> lex_number(size_t p) {
    const int line = line_at(p);
    auto without_underscores = [&](size_t b, size_t e) {
      std::string s;
      for (size_t k = b; k < e; ++k)
        if (src_[k] != '_') s += src_[k];
      return s;
    };
    // Floats are not allowed straight after a dot, so `x.0.1` is two integer subscripts.
    if (p == 0 || src_[p - 1] != '.') {
      const size_t int_end = scan_digits(p);
      size_t float_end = std::string::npos;
      if (int_end < src_.size() && src_[int_end] == '.') {
        const size_t frac_end = scan_digits(int_end + 1);
        if (frac_end != std::string::npos) {
          const size_t exp_end = scan_exponent(frac_end);
          float_end = exp_end != std::string::npos ? exp_end : frac_end;
        }
      } else {
        float_end = scan_exponent(int_end);
      }
      if (float_end != std::string::npos) {
        const std::string text = without_underscores(p, float_end);
        tokens_.push_back(
            Token{TokenType::kFloat, text, 0, std::strtod(text.c_str(), nullptr), line});
        return float_end;
      }
    }
    int base = 10;
    size_t b = p;
    size_t e = p;
    if (src_[p] == '0' && p + 1 < src_.size() &&
        std::string_view("bBoOxX").find(src_[p + 1]) != std::string_view::npos) {
      const char k = static_cast<char>(src_[p + 1] | 0x20);
      base = k == 'b' ? 2 : k == 'o' ? 8 : 16;
      b = e = p + 2;
      auto ok = [&](char ch) {
        if (base == 2) return ch == '0' || ch == '1';
        if (base == 8) return ch >= '0' && ch <= '7';
        return is_digit(ch) || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f');
      };
      while (e < src_.size() &&
             (ok(src_[e]) || (src_[e] == '_' && e + 1 < src_.size() && ok(src_[e + 1]))))
        ++e;
      if (e == b) return make_error("line {}: invalid integer literal", line);
    } else if (src_[p] == '0') {
      e = p + 1;  // "0", "0_0": Python forbids leading zeros, so "01" lexes as 0 then 1
      while (e + 1 < src_.size() && src_[e] == '_' && src_[e + 1] == '0') e += 2;
      while (e < src_.size() && src_[e] == '0') ++e;
    } else {
      e = scan_digits(p);
    }
    const std::string digits = without_underscores(b, e);
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(digits.c_str(), &end, base);
    if (errno == ERANGE) return make_error("line {}: integer literal too large", line);
    tokens_.push_back(
        Token{TokenType::kInteger, src_.substr(p, e - p), static_cast<int64_t>(v), 0, line});
    return e;
  }

  std::string src_;
  LexerOptions opt_;
  std::vector<Token> tokens_;
  bool line_starting_ = true;  // the last consumed character was a newline (or nothing yet)
  size_t counted_pos_ = 0;
  int counted_line_ = 1;
};

}  // namespace

Result<std::vector<Token>> tokenize(std::string_view source, const LexerOptions& options) {
  Lexer lexer(normalize_newlines(source, options.keep_trailing_newline), options);
  return lexer.run();
}

}  // namespace tangram::jinja
