// Python semantics of Jinja's arithmetic, concatenation and comparison operators.
#pragma once

#include <string_view>

#include "chat/jinja_value.h"

namespace tangram::jinja {

// a <op> b for "+", "-", "*", "/", "//", "%", "**", "~". Results larger than max_bytes (string
// or list repetition, concatenation) are errors rather than allocations.
Result<Value> binary_op(std::string_view op, const Value& a, const Value& b, size_t max_bytes);
// a <op> b for "==", "!=", "<", "<=", ">", ">=", "in", "notin".
Result<bool> compare_op(std::string_view op, const Value& a, const Value& b);
// Unary minus and plus.
Result<Value> unary_op(bool negate, const Value& a);
// The error Jinja raises when an undefined value is used where a value is required.
Error undefined_error(const Value& v);

}  // namespace tangram::jinja
