// Global functions every template sees: Hugging Face's raise_exception and strftime_now, and
// Jinja's namespace, range and dict.
#include <ctime>

#include "chat/jinja_builtins.h"
#include "chat/jinja_interpreter.h"

namespace tangram::jinja {

namespace {

// Jinja2's sandbox refuses larger ranges.
constexpr int64_t kMaxRange = 100000;

Result<Value> raise_exception(Interpreter&, CallArgs& args) {
  TG_ASSIGN(auto a, bind_args(args, "raise_exception", {"message"}));
  return make_error("raise_exception: {}", a[0] ? to_py_str(*a[0]) : std::string());
}

Result<Value> strftime_now(Interpreter& in, CallArgs& args) {
  TG_ASSIGN(auto a, bind_args(args, "strftime_now", {"format"}));
  if (!a[0] || !a[0]->is_string()) return make_error("strftime_now() needs a format string");
  const std::string& format = a[0]->as_string();
  if (format.size() > 1024) return make_error("strftime_now() format is too long");
  const std::tm tm = in.now();
  std::string buf(256 + format.size() * 16, '\0');
  // The format comes from the template by design (strftime_now's contract).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  const size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &tm);
#pragma GCC diagnostic pop
  buf.resize(n);
  return Value::string(std::move(buf));
}

// dict(*args, **kwargs) as Python builds it: an optional mapping or list of pairs, then keywords.
Result<Dict> build_dict(const CallArgs& args, std::string_view function) {
  if (args.positional.size() > 1)
    return make_error("{}() expected at most 1 positional argument", function);
  Dict d;
  if (!args.positional.empty()) {
    const Value& init = args.positional[0];
    if (init.is_dict()) {
      d = init.as_dict();
    } else if (init.is_list()) {
      for (const Value& pair : init.as_list()) {
        if (!pair.is_list() || pair.as_list().size() != 2)
          return make_error("{}() needs (key, value) pairs", function);
        TG_TRY(d.set(pair.as_list()[0], pair.as_list()[1]));
      }
    } else {
      return make_error("{}() argument must be a mapping, not {}", function, type_name(init));
    }
  }
  for (const auto& [key, value] : args.keyword) d.set(key, value);
  return d;
}

Result<Value> make_namespace(Interpreter&, CallArgs& args) {
  TG_ASSIGN(Dict d, build_dict(args, "namespace"));
  for (const auto& entry : d.entries()) {
    if (contains_object(entry.second) || entry.second.depth() > kMaxValueDepth)
      return make_error("namespace() attributes cannot hold namespaces or loop objects");
  }
  return Value::object(Object{"Namespace", std::make_shared<Dict>(std::move(d)), true});
}

Result<Value> make_dict(Interpreter&, CallArgs& args) {
  TG_ASSIGN(Dict d, build_dict(args, "dict"));
  return Value::dict(std::move(d));
}

Result<Value> make_range(Interpreter& in, CallArgs& args) {
  if (!args.keyword.empty()) return make_error("range() takes no keyword arguments");
  if (args.positional.empty() || args.positional.size() > 3)
    return make_error("range expected 1 to 3 arguments, got {}", args.positional.size());
  int64_t bounds[3] = {0, 0, 1};
  for (size_t i = 0; i < args.positional.size(); ++i) {
    const Value& v = args.positional[i];
    if (!v.is_int() && !v.is_bool())
      return make_error("'{}' object cannot be interpreted as an integer", type_name(v));
  }
  if (args.positional.size() == 1) {
    bounds[1] = args.positional[0].as_integral();
  } else {
    bounds[0] = args.positional[0].as_integral();
    bounds[1] = args.positional[1].as_integral();
    if (args.positional.size() == 3) bounds[2] = args.positional[2].as_integral();
  }
  const int64_t start = bounds[0], stop = bounds[1], step = bounds[2];
  if (step == 0) return make_error("range() arg 3 must not be zero");
  // Count without overflow: the numbers of steps between start and stop.
  const long double span = static_cast<long double>(stop) - static_cast<long double>(start);
  const long double steps = span / static_cast<long double>(step);
  if (steps > static_cast<long double>(kMaxRange))
    return make_error("Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).",
                      kMaxRange);
  TG_TRY(in.charge(steps > 0 ? static_cast<int64_t>(steps) : 0));
  List out;
  int64_t i = start;
  while (step > 0 ? i < stop : i > stop) {
    out.push_back(Value::integer(i));
    if (__builtin_add_overflow(i, step, &i)) break;
  }
  return Value::list(std::move(out));
}

}  // namespace

void add_global_functions(Dict& globals) {
  globals.set("raise_exception", Value::callable("raise_exception", raise_exception));
  globals.set("strftime_now", Value::callable("strftime_now", strftime_now));
  globals.set("namespace", Value::callable("namespace", make_namespace));
  globals.set("dict", Value::callable("dict", make_dict));
  globals.set("range", Value::callable("range", make_range));
}

}  // namespace tangram::jinja
