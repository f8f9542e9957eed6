// Built-in tests (`value is name(args)`), following Jinja2 3.1.
#include "chat/jinja_builtins.h"
#include "chat/jinja_interpreter.h"
#include "chat/jinja_operators.h"
#include "chat/jinja_unicode.h"

namespace tangram::jinja {

namespace {

using Bound = std::vector<std::optional<Value>>;

Result<Value> one_arg(const CallArgs& args, std::string_view name) {
  TG_ASSIGN(Bound a, bind_args(args, name, {"other"}));
  if (!a[0]) return make_error("test '{}' needs an argument", name);
  return *a[0];
}

Result<bool> no_args(const CallArgs& args, std::string_view name) {
  TG_ASSIGN(Bound a, bind_args(args, name, {}));
  return true;
}

#define TG_SIMPLE_TEST(fn_name, test_name, expr)                             \
  Result<bool> fn_name(Interpreter&, const Value& v, const CallArgs& args) { \
    TG_TRY(no_args(args, test_name));                                        \
    (void)v;                                                                 \
    return (expr);                                                           \
  }

TG_SIMPLE_TEST(t_defined, "defined", !v.is_undefined())
TG_SIMPLE_TEST(t_undefined, "undefined", v.is_undefined())
TG_SIMPLE_TEST(t_none, "none", v.is_none())
TG_SIMPLE_TEST(t_boolean, "boolean", v.is_bool())
TG_SIMPLE_TEST(t_false, "false", v.is_bool() && !v.as_bool())
TG_SIMPLE_TEST(t_true, "true", v.is_bool() && v.as_bool())
TG_SIMPLE_TEST(t_integer, "integer", v.is_int())
TG_SIMPLE_TEST(t_float, "float", v.is_float())
TG_SIMPLE_TEST(t_number, "number", v.is_number())
TG_SIMPLE_TEST(t_string, "string", v.is_string())
TG_SIMPLE_TEST(t_mapping, "mapping", v.is_dict())
// Undefined iterates (as empty) and has a length, so Jinja counts it as iterable and sequence.
TG_SIMPLE_TEST(t_iterable, "iterable",
               v.is_list() || v.is_dict() || v.is_string() || v.is_undefined())
TG_SIMPLE_TEST(t_sequence, "sequence",
               v.is_indexable_list() || v.is_dict() || v.is_string() || v.is_undefined())
TG_SIMPLE_TEST(t_callable, "callable", v.is_callable())
TG_SIMPLE_TEST(t_escaped, "escaped", v.is_markup())
TG_SIMPLE_TEST(t_lower, "lower", [&] {
  const std::string s = to_py_str(v);
  bool cased = false;
  for (char32_t c : decode_utf8(s)) {
    if (!py_is_cased_letter(c)) continue;
    cased = true;
    if (py_to_lower(c) != c) return false;
  }
  return cased;
}())
TG_SIMPLE_TEST(t_upper, "upper", [&] {
  const std::string s = to_py_str(v);
  bool cased = false;
  for (char32_t c : decode_utf8(s)) {
    if (!py_is_cased_letter(c)) continue;
    cased = true;
    if (py_to_upper(c) != c) return false;
  }
  return cased;
}())

#undef TG_SIMPLE_TEST

// Jinja's even/odd: value % 2 == 0 / == 1 (so floats work and strings fail as Python's % does).
Result<bool> t_even(Interpreter&, const Value& v, const CallArgs& args) {
  TG_TRY(no_args(args, "even"));
  TG_ASSIGN(Value r, binary_op("%", v, Value::integer(2), 0));
  return py_equal(r, Value::integer(0));
}

Result<bool> t_odd(Interpreter&, const Value& v, const CallArgs& args) {
  TG_TRY(no_args(args, "odd"));
  TG_ASSIGN(Value r, binary_op("%", v, Value::integer(2), 0));
  return py_equal(r, Value::integer(1));
}

Result<bool> t_divisibleby(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Value n, one_arg(args, "divisibleby"));
  TG_ASSIGN(Value r, binary_op("%", v, n, 0));
  return py_equal(r, Value::integer(0));
}

Result<bool> compare_test(const Value& v, const CallArgs& args, std::string_view name,
                          std::string_view op) {
  TG_ASSIGN(Value other, one_arg(args, name));
  return compare_op(op, v, other);
}

Result<bool> t_eq(Interpreter&, const Value& v, const CallArgs& a) {
  return compare_test(v, a, "eq", "==");
}
Result<bool> t_ne(Interpreter&, const Value& v, const CallArgs& a) {
  return compare_test(v, a, "ne", "!=");
}
Result<bool> t_lt(Interpreter&, const Value& v, const CallArgs& a) {
  return compare_test(v, a, "lt", "<");
}
Result<bool> t_le(Interpreter&, const Value& v, const CallArgs& a) {
  return compare_test(v, a, "le", "<=");
}
Result<bool> t_gt(Interpreter&, const Value& v, const CallArgs& a) {
  return compare_test(v, a, "gt", ">");
}
Result<bool> t_ge(Interpreter&, const Value& v, const CallArgs& a) {
  return compare_test(v, a, "ge", ">=");
}
Result<bool> t_in(Interpreter&, const Value& v, const CallArgs& a) {
  return compare_test(v, a, "in", "in");
}

// Python's `is`: identity. Scalars of equal value are identical for the cases templates use
// (`x is sameas false`, `x is sameas none`).
Result<bool> t_sameas(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Value other, one_arg(args, "sameas"));
  if (v.kind() != other.kind()) return false;
  switch (v.kind()) {
    case Kind::kList:
      return v.list_ptr() == other.list_ptr();
    case Kind::kDict:
      return v.dict_ptr() == other.dict_ptr();
    case Kind::kObject:
      return v.as_object().attrs == other.as_object().attrs;
    case Kind::kCallable:
      return &v.as_callable() == &other.as_callable();
    default:
      return py_equal(v, other);
  }
}

Result<bool> t_filter(Interpreter&, const Value& v, const CallArgs& args) {
  TG_TRY(no_args(args, "filter"));
  return v.is_string() && find_filter(v.as_string()) != nullptr;
}

Result<bool> t_test(Interpreter&, const Value& v, const CallArgs& args) {
  TG_TRY(no_args(args, "test"));
  return v.is_string() && find_test(v.as_string()) != nullptr;
}

struct TestEntry {
  std::string_view name;
  TestFn fn;
};

constexpr TestEntry kTests[] = {
    {"defined", t_defined},
    {"undefined", t_undefined},
    {"none", t_none},
    {"boolean", t_boolean},
    {"false", t_false},
    {"true", t_true},
    {"integer", t_integer},
    {"float", t_float},
    {"number", t_number},
    {"string", t_string},
    {"mapping", t_mapping},
    {"iterable", t_iterable},
    {"sequence", t_sequence},
    {"callable", t_callable},
    {"escaped", t_escaped},
    {"lower", t_lower},
    {"upper", t_upper},
    {"even", t_even},
    {"odd", t_odd},
    {"divisibleby", t_divisibleby},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"==", t_eq},
    {"ne", t_ne},
    {"!=", t_ne},
    {"lt", t_lt},
    {"lessthan", t_lt},
    {"<", t_lt},
    {"le", t_le},
    {"<=", t_le},
    {"gt", t_gt},
    {"greaterthan", t_gt},
    {">", t_gt},
    {"ge", t_ge},
    {">=", t_ge},
    {"in", t_in},
    {"sameas", t_sameas},
    {"filter", t_filter},
    {"test", t_test},
};

}  // namespace

TestFn find_test(std::string_view name) {
  for (const TestEntry& t : kTests)
    if (t.name == name) return t.fn;
  return nullptr;
}

}  // namespace tangram::jinja
