#include "chat/jinja_operators.h"

#include <cmath>

#include "chat/jinja_format.h"

namespace tangram::jinja {

Error undefined_error(const Value& v) {
  return Error{v.undefined_hint().empty() ? std::string("value is undefined") : v.undefined_hint()};
}

namespace {

Error unsupported(std::string_view op, const Value& a, const Value& b) {
  return make_error("unsupported operand type(s) for {}: '{}' and '{}'", op, type_name(a),
                    type_name(b));
}

Result<Value> repeat(const Value& seq, int64_t times, size_t max_bytes) {
  if (times <= 0) return seq.is_string() ? Value::string("") : Value::list(List{}, seq.seq());
  const auto n = static_cast<uint64_t>(times);
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty() && n > max_bytes / s.size())
      return make_error("string repetition exceeds the output limit");
    std::string out;
    out.reserve(s.size() * n);
    for (uint64_t i = 0; i < n; ++i) out += s;
    return seq.is_markup() ? Value::markup(std::move(out)) : Value::string(std::move(out));
  }
  const List& items = seq.as_list();
  // A Value holds its string by value, so each copy of the list copies its strings' bytes too
  // (["a" * 60000000] * 1000 would be 60 GB); nested lists and dicts are shared.
  size_t item_bytes = 0;
  for (const Value& v : items)
    item_bytes += sizeof(Value) + (v.is_string() ? v.as_string().size() : 0);
  if (item_bytes > 0 && n > max_bytes / item_bytes)
    return make_error("list repetition exceeds the size limit");
  List out;
  out.reserve(items.size() * n);
  for (uint64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), seq.seq());
}

Result<Value> arithmetic(std::string_view op, const Value& a, const Value& b) {
  const bool ints = !a.is_float() && !b.is_float();
  if (ints) {
    const int64_t x = a.as_integral();
    const int64_t y = b.as_integral();
    int64_t r = 0;
    if (op == "+") {
      if (__builtin_add_overflow(x, y, &r)) return make_error("integer overflow in +");
      return Value::integer(r);
    }
    if (op == "-") {
      if (__builtin_sub_overflow(x, y, &r)) return make_error("integer overflow in -");
      return Value::integer(r);
    }
    if (op == "*") {
      if (__builtin_mul_overflow(x, y, &r)) return make_error("integer overflow in *");
      return Value::integer(r);
    }
    if (op == "/") {
      if (y == 0) return make_error("division by zero");
      return Value::number(static_cast<double>(x) / static_cast<double>(y));
    }
    if (op == "//" || op == "%") {
      if (y == 0) return make_error("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) return make_error("integer overflow in {}", op);
      int64_t q = x / y;
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {  // Python floors toward negative infinity
        --q;
        m += y;
      }
      return Value::integer(op == "//" ? q : m);
    }
    if (op == "**") {
      if (y < 0) return Value::number(std::pow(static_cast<double>(x), static_cast<double>(y)));
      int64_t result = 1;
      for (int64_t i = 0; i < y; ++i) {
        if (__builtin_mul_overflow(result, x, &result)) return make_error("integer overflow in **");
        if (result == 0 || result == 1) break;  // 0 and 1 are fixed points
      }
      if (result == 1 && x == -1 && (y % 2) == 1) result = -1;
      return Value::integer(result);
    }
  }
  const double x = a.as_double();
  const double y = b.as_double();
  if (op == "+") return Value::number(x + y);
  if (op == "-") return Value::number(x - y);
  if (op == "*") return Value::number(x * y);
  if (op == "/") {
    if (y == 0) return make_error("float division by zero");
    return Value::number(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) return make_error("float modulo by zero");
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    if (op == "%") return Value::number(m);
    return Value::number(std::round((x - m) / y));
  }
  if (op == "**") return Value::number(std::pow(x, y));
  return make_error("unknown operator '{}'", op);
}

}  // namespace

Result<Value> binary_op(std::string_view op, const Value& a, const Value& b, size_t max_bytes) {
  if (op == "~") {
    std::string s = to_py_str(a);
    s += to_py_str(b);
    if (s.size() > max_bytes) return make_error("string concatenation exceeds the output limit");
    return Value::string(std::move(s));
  }
  if (op == "%" && a.is_string()) return py_percent_format(a.as_string(), b);
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      if (a.as_string().size() + b.as_string().size() > max_bytes)
        return make_error("string concatenation exceeds the output limit");
      if (a.is_markup() || b.is_markup()) {  // Markup escapes the plain side
        const std::string lhs = a.is_markup() ? a.as_string() : html_escape(a.as_string());
        const std::string rhs = b.is_markup() ? b.as_string() : html_escape(b.as_string());
        return Value::markup(lhs + rhs);
      }
      return Value::string(a.as_string() + b.as_string());
    }
    if (a.is_indexable_list() && b.is_indexable_list() && a.seq() == b.seq()) {
      List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return Value::list(std::move(out), a.seq());
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_indexable_list()) && (b.is_int() || b.is_bool()))
      return repeat(a, b.as_integral(), max_bytes);
    if ((b.is_string() || b.is_indexable_list()) && (a.is_int() || a.is_bool()))
      return repeat(b, a.as_integral(), max_bytes);
  }
  return unsupported(op, a, b);
}

Result<bool> compare_op(std::string_view op, const Value& a, const Value& b) {
  if (op == "==") return py_equal(a, b);
  if (op == "!=") return !py_equal(a, b);
  if (op == "in") return py_contains(b, a);
  if (op == "notin") {
    TG_ASSIGN(bool r, py_contains(b, a));
    return !r;
  }
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  if (op == "<") return py_less(a, b);
  if (op == ">") return py_less(b, a);
  if (op == "<=" || op == ">=") {
    const Value& lo = op == "<=" ? b : a;
    const Value& hi = op == "<=" ? a : b;
    TG_ASSIGN(bool greater, py_less(lo, hi));
    return !greater;
  }
  return make_error("unknown comparison '{}'", op);
}

Result<Value> unary_op(bool negate, const Value& a) {
  if (a.is_undefined()) return undefined_error(a);
  if (!a.is_number())
    return make_error("bad operand type for unary {}: '{}'", negate ? "-" : "+", type_name(a));
  if (a.is_float()) return Value::number(negate ? -a.as_float() : a.as_float());
  const int64_t v = a.as_integral();
  if (negate && v == INT64_MIN) return make_error("integer overflow in unary -");
  return Value::integer(negate ? -v : v);
}

}  // namespace tangram::jinja
