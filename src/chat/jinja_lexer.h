// Jinja2 lexer: splits a template into text and tag tokens, applying whitespace control
// ({%- -%}, {{- -}}, {#- -#}, {%+) and the environment's trim_blocks / lstrip_blocks options the
// way Jinja2's own lexer does, and tokenizes the expressions inside tags.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace tangram::jinja {

enum class TokenType {
  kData,           // literal template text (already whitespace-processed)
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,  // text holds the unescaped value
  kInteger,
  kFloat,
  kOperator,  // text holds the operator, e.g. "==" or "("
  kEnd,
};

struct Token {
  TokenType type = TokenType::kEnd;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

struct LexerOptions {
  bool trim_blocks = true;    // drop the first newline after a block or comment tag
  bool lstrip_blocks = true;  // drop spaces and tabs before a block or comment tag on its line
  bool keep_trailing_newline = false;
};

// Tokenizes the whole template. Errors name the line and the problem.
Result<std::vector<Token>> tokenize(std::string_view source, const LexerOptions& options);

}  // namespace tangram::jinja
