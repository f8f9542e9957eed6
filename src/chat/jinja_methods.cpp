// Methods of str and dict values (`s.strip()`, `d.items()`, ...), Python semantics.
#include <algorithm>

#include "chat/jinja_builtins.h"
#include "chat/jinja_interpreter.h"
#include "chat/jinja_unicode.h"

namespace tangram::jinja {

namespace {

constexpr std::string_view kStringMethods[] = {
    "strip",      "lstrip",   "rstrip",  "split",   "rsplit", "splitlines",
    "startswith", "endswith", "replace", "upper",   "lower",  "title",
    "capitalize", "find",     "rfind",   "count",   "join",   "isdigit",
    "isalpha",    "isalnum",  "isspace", "islower", "isupper"};
constexpr std::string_view kDictMethods[] = {"get", "items", "keys", "values", "copy"};
constexpr std::string_view kUnsafeDictMethods[] = {"pop", "popitem", "update", "setdefault",
                                                   "clear"};
constexpr std::string_view kUnsafeListMethods[] = {"append", "extend",  "insert", "pop",
                                                   "remove", "reverse", "sort",   "clear"};

template <size_t N>
bool contains(const std::string_view (&list)[N], std::string_view name) {
  return std::find(std::begin(list), std::end(list), name) != std::end(list);
}

// An optional string argument that may be None (e.g. strip(None)).
Result<const std::string*> optional_string(const std::optional<Value>& v, std::string_view what) {
  if (!v || v->is_none()) return static_cast<const std::string*>(nullptr);
  if (!v->is_string()) return make_error("{} must be str or None, not {}", what, type_name(*v));
  return &v->as_string();
}

Result<int64_t> optional_int(const std::optional<Value>& v, int64_t fallback,
                             std::string_view what) {
  if (!v) return fallback;
  if (!v->is_int() && !v->is_bool())
    return make_error("{} must be an integer, not {}", what, type_name(*v));
  return v->as_integral();
}

Value string_list(std::vector<std::string> parts) {
  List items;
  items.reserve(parts.size());
  for (auto& p : parts) items.push_back(Value::string(std::move(p)));
  return Value::list(std::move(items));
}

// startswith/endswith accept a string or a tuple (list) of strings.
Result<bool> affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const std::string& a) {
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0
                  : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_string()) return one(affix.as_string());
  if (affix.is_list()) {
    for (const Value& a : affix.as_list()) {
      if (!a.is_string())
        return make_error("tuple for {} must only contain str", prefix ? "startswith" : "endswith");
      if (one(a.as_string())) return true;
    }
    return false;
  }
  return make_error("{} arg must be str or a tuple of str, not {}",
                    prefix ? "startswith" : "endswith", type_name(affix));
}

template <typename Pred>
bool all_code_points(const std::string& s, Pred pred) {
  const std::u32string cps = decode_utf8(s);
  if (cps.empty()) return false;
  return std::all_of(cps.begin(), cps.end(), pred);
}

// max_bytes bounds any string a method builds (the interpreter's output limit).
Result<Value> string_method(const std::string& s, std::string_view name, const CallArgs& args,
                            size_t max_bytes) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    TG_ASSIGN(auto a, bind_args(args, name, {"chars"}));
    TG_ASSIGN(const std::string* chars, optional_string(a[0], "chars"));
    return Value::string(py_strip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    TG_ASSIGN(auto a, bind_args(args, name, {"sep", "maxsplit"}));
    TG_ASSIGN(const std::string* sep, optional_string(a[0], "sep"));
    if (sep && sep->empty()) return make_error("empty separator");
    TG_ASSIGN(int64_t maxsplit, optional_int(a[1], -1, "maxsplit"));
    return string_list(name == "split" ? py_split(s, sep, maxsplit) : py_rsplit(s, sep, maxsplit));
  }
  if (name == "splitlines") {
    TG_ASSIGN(auto a, bind_args(args, name, {}));
    return string_list(py_splitlines(s));
  }
  if (name == "startswith" || name == "endswith") {
    TG_ASSIGN(auto a, bind_args(args, name, {"prefix"}));
    if (!a[0]) return make_error("{}() takes at least 1 argument", name);
    TG_ASSIGN(bool r, affix_match(s, *a[0], name == "startswith"));
    return Value::boolean(r);
  }
  if (name == "replace") {
    TG_ASSIGN(auto a, bind_args(args, name, {"old", "new", "count"}));
    if (!a[0] || !a[1] || !a[0]->is_string() || !a[1]->is_string())
      return make_error("replace() takes two str arguments");
    TG_ASSIGN(int64_t count, optional_int(a[2], -1, "count"));
    TG_ASSIGN(std::string out,
              py_replace(s, a[0]->as_string(), a[1]->as_string(), count, max_bytes));
    return Value::string(std::move(out));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    TG_ASSIGN(auto a, bind_args(args, name, {}));
    if (name == "upper") return Value::string(py_upper(s));
    if (name == "lower") return Value::string(py_lower(s));
    if (name == "title") return Value::string(py_title(s));
    return Value::string(py_capitalize(s));
  }
  if (name == "find" || name == "rfind" || name == "count") {
    TG_ASSIGN(auto a, bind_args(args, name, {"sub"}));
    if (!a[0] || !a[0]->is_string()) return make_error("{}() argument must be str", name);
    const std::string& sub = a[0]->as_string();
    if (name == "count") {
      if (sub.empty()) return Value::integer(static_cast<int64_t>(count_code_points(s)) + 1);
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value::integer(n);
    }
    const size_t p = name == "find" ? s.find(sub) : s.rfind(sub);
    if (p == std::string::npos) return Value::integer(-1);
    return Value::integer(
        static_cast<int64_t>(count_code_points(std::string_view(s).substr(0, p))));
  }
  if (name == "join") {
    TG_ASSIGN(auto a, bind_args(args, name, {"iterable"}));
    if (!a[0]) return make_error("join() takes exactly one argument");
    TG_ASSIGN(ListPtr items, iterate(*a[0]));
    std::string out;
    for (size_t i = 0; i < items->size(); ++i) {
      if (!(*items)[i].is_string())
        return make_error("sequence item {}: expected str instance, {} found", i,
                          type_name((*items)[i]));
      if (i > 0) out += s;
      out += (*items)[i].as_string();
    }
    return Value::string(std::move(out));
  }
  TG_ASSIGN(auto a, bind_args(args, name, {}));
  if (name == "isdigit")
    return Value::boolean(all_code_points(s, [](char32_t c) { return c >= '0' && c <= '9'; }));
  if (name == "isalpha")
    return Value::boolean(all_code_points(s, [](char32_t c) { return py_is_cased_letter(c); }));
  if (name == "isalnum")
    return Value::boolean(all_code_points(
        s, [](char32_t c) { return py_is_cased_letter(c) || (c >= '0' && c <= '9'); }));
  if (name == "isspace") return Value::boolean(all_code_points(s, is_py_space));
  // islower/isupper: at least one cased character and none of the other case.
  const std::u32string cps = decode_utf8(s);
  bool any_cased = false;
  for (char32_t c : cps) {
    if (!py_is_cased_letter(c)) continue;
    any_cased = true;
    if (name == "islower" && py_to_lower(c) != c) return Value::boolean(false);
    if (name == "isupper" && py_to_upper(c) != c) return Value::boolean(false);
  }
  return Value::boolean(any_cased);
}

Result<Value> dict_method(const Value& obj, std::string_view name, const CallArgs& args) {
  const Dict& d = obj.as_dict();
  if (name == "get") {
    TG_ASSIGN(auto a, bind_args(args, name, {"key", "default"}));
    if (!a[0]) return make_error("get expected at least 1 argument, got 0");
    const Value* v = d.find(*a[0]);
    if (v) return *v;
    return a[1] ? *a[1] : Value::none();
  }
  TG_ASSIGN(auto a, bind_args(args, name, {}));
  if (name == "copy") return obj;
  List out;
  out.reserve(d.size());
  for (const auto& [key, value] : d.entries()) {
    if (name == "keys")
      out.push_back(key);
    else if (name == "values")
      out.push_back(value);
    else
      out.push_back(Value::list(List{key, value}, Seq::kTuple));
  }
  const Seq view = name == "keys"     ? Seq::kDictKeys
                   : name == "values" ? Seq::kDictValues
                                      : Seq::kDictItems;
  return Value::list(std::move(out), view);
}

// Markup's wrapped str methods: string arguments are escaped (except for the split family) and
// the result is Markup again.
Result<Value> markup_method(const Value& obj, std::string_view name, const CallArgs& args,
                            size_t max_bytes) {
  CallArgs escaped = args;
  const bool splits = name == "split" || name == "rsplit" || name == "splitlines";  // no escaping
  for (Value& v : escaped.positional)
    if (!splits && v.is_string() && !v.is_markup()) v = Value::markup(html_escape(v.as_string()));
  for (auto& kv : escaped.keyword)
    if (!splits && kv.second.is_string() && !kv.second.is_markup())
      kv.second = Value::markup(html_escape(kv.second.as_string()));
  TG_ASSIGN(Value r, string_method(obj.as_string(), name, escaped, max_bytes));
  if (r.is_string()) return Value::markup(r.as_string());
  if (r.is_list()) {  // split/rsplit/splitlines give lists of Markup
    List parts;
    for (const Value& p : r.as_list()) parts.push_back(Value::markup(p.as_string()));
    return Value::list(std::move(parts));
  }
  return r;
}

constexpr std::string_view kMarkupPreservingMethods[] = {"strip", "lstrip", "rstrip",     "upper",
                                                         "lower", "title",  "capitalize", "replace",
                                                         "split", "rsplit", "splitlines"};

}  // namespace

MethodKind method_kind(const Value& obj, std::string_view name) {
  if (obj.is_string())
    return contains(kStringMethods, name) ? MethodKind::kSafe : MethodKind::kNone;
  if (obj.is_dict()) {
    if (contains(kDictMethods, name)) return MethodKind::kSafe;
    return contains(kUnsafeDictMethods, name) ? MethodKind::kUnsafe : MethodKind::kNone;
  }
  if (obj.is_list())
    return contains(kUnsafeListMethods, name) ? MethodKind::kUnsafe : MethodKind::kNone;
  return MethodKind::kNone;
}

Result<Value> call_method(Interpreter& in, const Value& obj, std::string_view name,
                          const CallArgs& args) {
  const size_t max_bytes = in.limits().max_output_bytes;
  if (obj.is_markup() && contains(kMarkupPreservingMethods, name))
    return markup_method(obj, name, args, max_bytes);
  if (obj.is_string()) return string_method(obj.as_string(), name, args, max_bytes);
  if (obj.is_dict()) return dict_method(obj, name, args);
  return make_error("'{}' object has no method '{}'", type_name(obj), name);
}

}  // namespace tangram::jinja
