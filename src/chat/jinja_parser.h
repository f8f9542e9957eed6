// Jinja2 parser: turns the lexer's tokens into a statement tree, following Jinja2's grammar and
// operator precedence. Unsupported tags (include, extends, import, ...) are errors naming the
// tag and line; nesting is bounded so that hostile templates cannot exhaust the stack.
#pragma once

#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"
#include "common/result.h"

namespace tangram::jinja {

// Bounds on syntactic nesting (statement blocks, and expression depth).
constexpr int kMaxParseDepth = 96;

Result<Body> parse_template(const std::vector<Token>& tokens);

}  // namespace tangram::jinja
