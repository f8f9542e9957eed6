// Built-in filters (`value | name(args)`), following Jinja2 3.1 and Hugging Face's tojson.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "chat/jinja_access.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_interpreter.h"
#include "chat/jinja_json.h"
#include "chat/jinja_operators.h"
#include "chat/jinja_unicode.h"

namespace tangram::jinja {

namespace {

using Bound = std::vector<std::optional<Value>>;

bool flag(const std::optional<Value>& v) { return v && truthy(*v); }

// Jinja's soft_str: str(value), with undefined as "".
std::string soft_str(const Value& v) { return to_py_str(v); }

// A string result that stays Markup when the input was (Markup's str methods return Markup).
Value keep_markup(const Value& input, std::string s) {
  return input.is_markup() ? Value::markup(std::move(s)) : Value::string(std::move(s));
}

Result<ListPtr> items_of(Interpreter& in, const Value& v) {
  TG_ASSIGN(ListPtr items, iterate(v));
  TG_TRY(in.charge(static_cast<int64_t>(items->size())));
  return items;
}

// Sort key of an item: optional attribute path, lower-cased strings unless case-sensitive.
Result<Value> sort_key(const Value& item, const std::optional<Value>& attribute,
                       bool case_sensitive) {
  Value key = item;
  if (attribute && !attribute->is_none()) {
    TG_ASSIGN(key, get_attribute_path(item, to_py_str(*attribute)));
  }
  if (!case_sensitive && key.is_string()) key = Value::string(py_lower(key.as_string()));
  return key;
}

// Stable sort of items by precomputed keys, as Python's sorted(): a bottom-up merge sort that
// stops with the TypeError of the first incomparable pair (std::stable_sort needs a comparator
// that cannot fail).
Result<List> sorted_by_keys(List items, std::vector<Value> keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::vector<size_t> merged(order.size());
  for (size_t width = 1; width < order.size(); width *= 2) {
    for (size_t lo = 0; lo < order.size(); lo += 2 * width) {
      const size_t mid = std::min(lo + width, order.size());
      const size_t hi = std::min(lo + 2 * width, order.size());
      size_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) {
        // Take from the right run only when it is strictly smaller (keeps equal keys in order).
        const Value& right = keys[order[j]];
        const Value& left = keys[order[i]];
        TG_ASSIGN(bool right_first, reverse ? py_less(left, right) : py_less(right, left));
        merged[k++] = right_first ? order[j++] : order[i++];
      }
      while (i < mid) merged[k++] = order[i++];
      while (j < hi) merged[k++] = order[j++];
    }
    order.swap(merged);
  }
  List out;
  out.reserve(items.size());
  for (size_t i : order) out.push_back(std::move(items[i]));
  return out;
}

Result<Value> f_abs(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "abs", {}));
  if (!v.is_number()) return make_error("bad operand type for abs(): '{}'", type_name(v));
  if (v.is_float()) return Value::number(std::fabs(v.as_float()));
  if (v.as_integral() == INT64_MIN) return make_error("integer overflow in abs()");
  return Value::integer(std::llabs(v.as_integral()));
}

Result<Value> f_attr(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "attr", {"name"}));
  if (!a[0] || !a[0]->is_string()) return make_error("attr() needs an attribute name");
  return get_attr(v, a[0]->as_string());
}

Result<Value> f_batch(Interpreter& in, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "batch", {"linecount", "fill_with"}));
  if (!a[0] || (!a[0]->is_int() && !a[0]->is_bool()) || a[0]->as_integral() < 1)
    return make_error("batch() needs a positive line count");
  const auto size = static_cast<size_t>(a[0]->as_integral());
  TG_ASSIGN(ListPtr items, items_of(in, v));
  List out;
  List row;
  for (const Value& item : *items) {
    row.push_back(item);
    if (row.size() == size) {
      out.push_back(Value::list(std::move(row)));
      row = List{};
    }
  }
  if (!row.empty()) {
    if (a[1] && !a[1]->is_none())
      while (row.size() < size) row.push_back(*a[1]);
    out.push_back(Value::list(std::move(row)));
  }
  return Value::list(std::move(out), Seq::kGenerator);
}

Result<Value> f_capitalize(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "capitalize", {}));
  return keep_markup(v, py_capitalize(soft_str(v)));
}

Result<Value> f_default(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "default", {"default_value", "boolean"}));
  if (v.is_undefined() || (flag(a[1]) && !truthy(v))) return a[0] ? *a[0] : Value::string("");
  return v;
}

Result<Value> f_dictsort(Interpreter& in, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "dictsort", {"case_sensitive", "by", "reverse"}));
  if (!v.is_dict()) return make_error("dictsort expects a mapping, got {}", type_name(v));
  TG_TRY(in.charge(static_cast<int64_t>(v.as_dict().size())));
  int pos = 0;
  if (a[1]) {
    if (!a[1]->is_string() || (a[1]->as_string() != "key" && a[1]->as_string() != "value"))
      return make_error("You can only sort by either 'key' or 'value'");
    pos = a[1]->as_string() == "key" ? 0 : 1;
  }
  List items;
  std::vector<Value> keys;
  for (const auto& [key, value] : v.as_dict().entries()) {
    items.push_back(Value::list(List{key, value}, Seq::kTuple));
    TG_ASSIGN(Value k, sort_key(pos == 0 ? key : value, std::nullopt, flag(a[0])));
    keys.push_back(std::move(k));
  }
  TG_ASSIGN(List sorted, sorted_by_keys(std::move(items), std::move(keys), flag(a[2])));
  return Value::list(std::move(sorted));
}

Result<Value> f_escape(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "escape", {}));
  if (v.is_markup()) return v;
  return Value::markup(html_escape(soft_str(v)));
}

Result<Value> f_first(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "first", {}));
  TG_ASSIGN(ListPtr items, iterate(v));
  if (items->empty()) return Value::undefined("No first item, sequence was empty.");
  return items->front();
}

Result<Value> f_last(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "last", {}));
  if (v.is_list() && v.seq() == Seq::kGenerator)
    return make_error("'generator' object is not reversible");
  TG_ASSIGN(ListPtr items, iterate(v));
  if (items->empty()) return Value::undefined("No last item, sequence was empty.");
  return items->back();
}

// Python float(str): surrounding whitespace, underscores between digits, inf/nan.
std::optional<double> parse_py_float(const std::string& text) {
  std::string s = py_strip(text, nullptr, true, true);
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 == s.size() || !std::isdigit(static_cast<unsigned char>(s[i - 1])) ||
          !std::isdigit(static_cast<unsigned char>(s[i + 1])))
        return std::nullopt;
      continue;
    }
    clean += s[i];
  }
  if (clean.empty()) return std::nullopt;
  const std::string lower = py_lower(clean);
  const std::string body = (lower[0] == '+' || lower[0] == '-') ? lower.substr(1) : lower;
  if (body == "inf" || body == "infinity" || body == "nan") {
    const double x = body == "nan" ? std::numeric_limits<double>::quiet_NaN()
                                   : std::numeric_limits<double>::infinity();
    return lower[0] == '-' ? -x : x;
  }
  for (char c : body)
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.' && c != 'e' && c != '+' &&
        c != '-')
      return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double d = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return d;
}

Result<Value> f_float(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "float", {"default"}));
  const Value fallback = a[0] ? *a[0] : Value::number(0.0);
  if (v.is_undefined()) return undefined_error(v);  // float(Undefined) raises
  if (v.is_number()) return Value::number(v.as_double());
  if (v.is_string()) {
    const auto d = parse_py_float(v.as_string());
    return d ? Value::number(*d) : fallback;
  }
  return fallback;
}

Result<Value> f_int(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "int", {"default", "base"}));
  const Value fallback = a[0] ? *a[0] : Value::integer(0);
  if (v.is_undefined()) return undefined_error(v);  // int(Undefined) raises
  if (v.is_bool() || v.is_int()) return Value::integer(v.as_integral());
  if (v.is_float()) {
    const double d = v.as_float();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value::integer(static_cast<int64_t>(d));
  }
  if (!v.is_string()) return fallback;
  int base = 10;
  if (a[1]) {
    if (!a[1]->is_int()) return make_error("int() base must be an integer");
    base = static_cast<int>(a[1]->as_int());
  }
  std::string s = py_strip(v.as_string(), nullptr, true, true);
  std::string clean;
  for (char c : s)
    if (c != '_') clean += c;
  if (!clean.empty()) {
    errno = 0;
    char* end = nullptr;
    const long long x = std::strtoll(clean.c_str(), &end, base);
    if (end == clean.c_str() + clean.size() && errno == 0 &&
        !std::isspace(static_cast<unsigned char>(clean[0])))
      return Value::integer(static_cast<int64_t>(x));
  }
  // Jinja's quirk: "42.23" | int gives 42 by way of float().
  const auto d = parse_py_float(v.as_string());
  if (d && std::isfinite(*d) && std::fabs(*d) < 9.2e18)
    return Value::integer(static_cast<int64_t>(*d));
  return fallback;
}

Result<Value> f_indent(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "indent", {"width", "first", "blank"}));
  if (v.is_undefined()) return undefined_error(v);
  if (!v.is_string()) return make_error("indent expects a string, got {}", type_name(v));
  std::string indention = "    ";
  if (a[0]) {
    if (a[0]->is_string()) {
      indention = a[0]->as_string();
    } else if (a[0]->is_int() || a[0]->is_bool()) {
      const int64_t w = a[0]->as_integral();
      if (w > 4096) return make_error("indent width {} is too large", w);
      indention = std::string(w > 0 ? static_cast<size_t>(w) : 0, ' ');
    } else {
      return make_error("indent width must be an integer or a string");
    }
  }
  const std::vector<std::string> lines = py_splitlines(v.as_string() + "\n");
  std::string out;
  if (flag(a[2])) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) out += "\n" + indention;
      out += lines[i];
    }
  } else {
    out = lines.empty() ? std::string() : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      out += "\n";
      if (!lines[i].empty()) out += indention;
      out += lines[i];
    }
  }
  if (flag(a[1])) out = indention + out;
  return keep_markup(v, std::move(out));
}

Result<Value> f_items(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "items", {}));
  if (v.is_undefined()) return Value::list(List{}, Seq::kGenerator);
  if (!v.is_dict()) return make_error("Can only get item pairs from a mapping.");
  List out;
  for (const auto& [key, value] : v.as_dict().entries())
    out.push_back(Value::list(List{key, value}, Seq::kTuple));
  return Value::list(std::move(out), Seq::kGenerator);
}

Result<Value> f_join(Interpreter& in, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "join", {"d", "attribute"}));
  const std::string sep = a[0] ? soft_str(*a[0]) : std::string();
  TG_ASSIGN(ListPtr items, items_of(in, v));
  std::string out;
  for (size_t i = 0; i < items->size(); ++i) {
    if (i > 0) out += sep;
    if (a[1] && !a[1]->is_none()) {
      TG_ASSIGN(Value x, get_attribute_path((*items)[i], to_py_str(*a[1])));
      out += soft_str(x);
    } else {
      out += soft_str((*items)[i]);
    }
    if (out.size() > in.limits().max_output_bytes)
      return make_error("joined string exceeds the output limit");
  }
  return Value::string(std::move(out));
}

Result<Value> f_length(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "length", {}));
  TG_ASSIGN(int64_t n, py_len(v));
  return Value::integer(n);
}

Result<Value> f_list(Interpreter& in, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "list", {}));
  TG_ASSIGN(ListPtr items, items_of(in, v));
  return Value::list(items, Seq::kList);
}

Result<Value> f_lower(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "lower", {}));
  return keep_markup(v, py_lower(soft_str(v)));
}

Result<Value> f_upper(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "upper", {}));
  return keep_markup(v, py_upper(soft_str(v)));
}

// Jinja's title filter: capitalise after runs of whitespace, '-', '(', '{', '[' or '<'.
Result<Value> f_title(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "title", {}));
  std::u32string cps = decode_utf8(soft_str(v));
  bool word_start = true;
  for (char32_t& c : cps) {
    if (is_py_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<') {
      word_start = true;
      continue;
    }
    c = word_start ? py_to_upper(c) : py_to_lower(c);
    word_start = false;
  }
  return keep_markup(v, encode_utf8(cps));
}

// map/select/reject/selectattr/rejectattr yield nothing for a falsy input (Jinja checks
// `if value:` first) and return generators.
Result<Value> f_map(Interpreter& in, const Value& v, const CallArgs& args) {
  if (!truthy(v)) return Value::list(List{}, Seq::kGenerator);
  TG_ASSIGN(ListPtr items, items_of(in, v));
  List out;
  out.reserve(items->size());
  if (args.positional.empty()) {
    TG_ASSIGN(Bound a, bind_args(args, "map", {"attribute", "default"}));
    if (!a[0]) return make_error("map requires a filter argument");
    const std::string path = to_py_str(*a[0]);
    for (const Value& item : *items) {
      TG_ASSIGN(Value x, get_attribute_path(item, path));
      if (x.is_undefined() && a[1]) x = *a[1];
      out.push_back(std::move(x));
    }
    return Value::list(std::move(out), Seq::kGenerator);
  }
  if (!args.positional[0].is_string()) return make_error("map requires a filter name");
  CallArgs rest;
  rest.line = args.line;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : *items) {
    TG_ASSIGN(Value x, in.apply_filter(args.positional[0].as_string(), item, rest));
    out.push_back(std::move(x));
  }
  return Value::list(std::move(out), Seq::kGenerator);
}

// select / reject / selectattr / rejectattr.
Result<Value> select_items(Interpreter& in, const Value& v, const CallArgs& args, bool keep_matches,
                           bool by_attribute) {
  if (!truthy(v)) return Value::list(List{}, Seq::kGenerator);
  TG_ASSIGN(ListPtr items, items_of(in, v));
  size_t off = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty()) return make_error("missing parameter for attribute name");
    attribute = to_py_str(args.positional[0]);
    off = 1;
  }
  std::string test;
  CallArgs test_args;
  test_args.line = args.line;
  if (args.positional.size() > off) {
    if (!args.positional[off].is_string()) return make_error("test name must be a string");
    test = args.positional[off].as_string();
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(off + 1),
                                args.positional.end());
    test_args.keyword = args.keyword;
  }
  List out;
  for (const Value& item : *items) {
    Value subject = item;
    if (by_attribute) {
      TG_ASSIGN(subject, get_attribute_path(item, attribute));
    }
    bool match = false;
    if (test.empty()) {
      match = truthy(subject);
    } else {
      TG_ASSIGN(match, in.apply_test(test, subject, test_args));
    }
    if (match == keep_matches) out.push_back(item);
  }
  return Value::list(std::move(out), Seq::kGenerator);
}

Result<Value> f_select(Interpreter& in, const Value& v, const CallArgs& args) {
  return select_items(in, v, args, true, false);
}
Result<Value> f_reject(Interpreter& in, const Value& v, const CallArgs& args) {
  return select_items(in, v, args, false, false);
}
Result<Value> f_selectattr(Interpreter& in, const Value& v, const CallArgs& args) {
  return select_items(in, v, args, true, true);
}
Result<Value> f_rejectattr(Interpreter& in, const Value& v, const CallArgs& args) {
  return select_items(in, v, args, false, true);
}

Result<Value> min_or_max(Interpreter& in, const Value& v, const CallArgs& args, bool want_max) {
  TG_ASSIGN(Bound a, bind_args(args, want_max ? "max" : "min", {"case_sensitive", "attribute"}));
  TG_ASSIGN(ListPtr items, items_of(in, v));
  if (items->empty()) return Value::undefined("No aggregated item, sequence was empty.");
  std::vector<Value> keys;
  for (const Value& item : *items) {
    TG_ASSIGN(Value k, sort_key(item, a[1], flag(a[0])));
    keys.push_back(std::move(k));
  }
  size_t best = 0;
  for (size_t i = 1; i < keys.size(); ++i) {
    TG_ASSIGN(bool better, want_max ? py_less(keys[best], keys[i]) : py_less(keys[i], keys[best]));
    if (better) best = i;
  }
  return (*items)[best];
}

Result<Value> f_max(Interpreter& in, const Value& v, const CallArgs& args) {
  return min_or_max(in, v, args, true);
}
Result<Value> f_min(Interpreter& in, const Value& v, const CallArgs& args) {
  return min_or_max(in, v, args, false);
}

Result<Value> f_replace(Interpreter& in, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "replace", {"old", "new", "count"}));
  if (!a[0] || !a[1]) return make_error("replace() needs old and new strings");
  int64_t count = -1;
  if (a[2] && !a[2]->is_none()) {
    if (!a[2]->is_int()) return make_error("replace() count must be an integer");
    count = a[2]->as_int();
  }
  TG_ASSIGN(std::string out, py_replace(soft_str(v), soft_str(*a[0]), soft_str(*a[1]), count,
                                        in.limits().max_output_bytes));
  return Value::string(std::move(out));
}

Result<Value> f_reverse(Interpreter& in, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "reverse", {}));
  if (v.is_string()) {
    std::u32string cps = decode_utf8(v.as_string());
    std::reverse(cps.begin(), cps.end());
    return Value::string(encode_utf8(cps));
  }
  TG_ASSIGN(ListPtr items, items_of(in, v));
  return Value::list(List(items->rbegin(), items->rend()), Seq::kGenerator);  // Python: an iterator
}

Result<Value> f_round(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "round", {"precision", "method"}));
  if (!v.is_number()) return make_error("round() expects a number, got {}", type_name(v));
  int64_t precision = 0;
  if (a[0]) {
    if (!a[0]->is_int()) return make_error("round() precision must be an integer");
    precision = std::clamp<int64_t>(a[0]->as_int(), -300, 300);
  }
  const std::string method = a[1] ? to_py_str(*a[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    return make_error("method must be common, ceil or floor");
  if (method == "common" && !v.is_float() && precision >= 0) return Value::integer(v.as_integral());
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_double() * scale;
  double r = 0;
  if (method == "ceil")
    r = std::ceil(x);
  else if (method == "floor")
    r = std::floor(x);
  else
    r = std::nearbyint(x);  // round-half-even, like Python's round()
  return Value::number(r / scale);
}

Result<Value> f_safe(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "safe", {}));
  return Value::markup(soft_str(v));
}

Result<Value> f_sort(Interpreter& in, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "sort", {"reverse", "case_sensitive", "attribute"}));
  TG_ASSIGN(ListPtr items, items_of(in, v));
  std::vector<Value> keys;
  for (const Value& item : *items) {
    TG_ASSIGN(Value k, sort_key(item, a[2], flag(a[1])));
    keys.push_back(std::move(k));
  }
  TG_ASSIGN(List sorted, sorted_by_keys(*items, std::move(keys), flag(a[0])));
  return Value::list(std::move(sorted));
}

Result<Value> f_string(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "string", {}));
  return keep_markup(v, soft_str(v));
}

Result<Value> f_sum(Interpreter& in, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "sum", {"attribute", "start"}));
  TG_ASSIGN(ListPtr items, items_of(in, v));
  Value total = a[1] ? *a[1] : Value::integer(0);
  for (const Value& item : *items) {
    Value x = item;
    if (a[0] && !a[0]->is_none()) {
      TG_ASSIGN(x, get_attribute_path(item, to_py_str(*a[0])));
    }
    TG_ASSIGN(total, binary_op("+", total, x, in.limits().max_output_bytes));
  }
  return total;
}

Result<Value> f_tojson(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a,
            bind_args(args, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"}));
  JsonDumpOptions options;
  options.ensure_ascii = flag(a[0]);
  if (a[1] && !a[1]->is_none()) {
    if (a[1]->is_string()) {
      options.indent = a[1]->as_string();
    } else if (a[1]->is_int() || a[1]->is_bool()) {
      const int64_t w = a[1]->as_integral();
      if (w > 4096) return make_error("indent {} is too large", w);
      options.indent = std::string(w > 0 ? static_cast<size_t>(w) : 0, ' ');
    } else {
      return make_error("indent must be an integer or a string");
    }
  }
  if (a[2] && !a[2]->is_none()) {
    if (!a[2]->is_list() || a[2]->as_list().size() != 2 || !a[2]->as_list()[0].is_string() ||
        !a[2]->as_list()[1].is_string())
      return make_error("separators must be a pair of strings");
    options.separators =
        std::make_pair(a[2]->as_list()[0].as_string(), a[2]->as_list()[1].as_string());
  }
  options.sort_keys = flag(a[3]);
  TG_ASSIGN(std::string text, py_json_dumps(v, options));
  return Value::string(std::move(text));
}

Result<Value> f_trim(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "trim", {"chars"}));
  std::string chars;
  const bool has_chars = a[0] && !a[0]->is_none();
  if (has_chars) chars = soft_str(*a[0]);
  return keep_markup(v, py_strip(soft_str(v), has_chars ? &chars : nullptr, true, true));
}

Result<Value> f_unique(Interpreter& in, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "unique", {"case_sensitive", "attribute"}));
  TG_ASSIGN(ListPtr items, items_of(in, v));
  List out;
  std::vector<Value> seen;
  for (const Value& item : *items) {
    TG_ASSIGN(Value key, sort_key(item, a[1], flag(a[0])));
    if (!is_hashable_key(key) && !key.is_undefined())
      return make_error("unhashable type: '{}'", type_name(key));
    TG_TRY(in.charge(static_cast<int64_t>(seen.size() / 64 + 1)));
    bool dup = false;
    for (const Value& s : seen) {
      if (py_equal(s, key)) {
        dup = true;
        break;
      }
    }
    if (dup) continue;
    seen.push_back(std::move(key));
    out.push_back(item);
  }
  return Value::list(std::move(out), Seq::kGenerator);
}

Result<Value> f_wordcount(Interpreter&, const Value& v, const CallArgs& args) {
  TG_ASSIGN(Bound a, bind_args(args, "wordcount", {}));
  int64_t words = 0;
  bool in_word = false;
  for (char32_t c : decode_utf8(soft_str(v))) {
    const bool word_char =
        (c < 0x80) ? (std::isalnum(static_cast<int>(c)) || c == '_') : !is_py_space(c);
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value::integer(words);
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"abs", f_abs},
    {"attr", f_attr},
    {"batch", f_batch},
    {"capitalize", f_capitalize},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"first", f_first},
    {"float", f_float},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"sort", f_sort},
    {"string", f_string},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"unique", f_unique},
    {"upper", f_upper},
    {"wordcount", f_wordcount},
};

}  // namespace

FilterFn find_filter(std::string_view name) {
  for (const FilterEntry& f : kFilters)
    if (f.name == name) return f.fn;
  return nullptr;
}

}  // namespace tangram::jinja
