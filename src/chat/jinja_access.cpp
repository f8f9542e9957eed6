#include "chat/jinja_access.h"

#include <charconv>

#include "chat/jinja_builtins.h"
#include "chat/jinja_operators.h"
#include "chat/jinja_unicode.h"

namespace tangram::jinja {

namespace {

Value missing_attribute(const Value& obj, std::string_view name) {
  return Value::undefined(fmt::format("'{} object' has no attribute '{}'", type_name(obj), name));
}

// obj.name as a method: a bound callable, an unsafe marker, or nothing.
bool lookup_method(const Value& obj, std::string_view name, Value* out) {
  switch (method_kind(obj, name)) {
    case MethodKind::kNone:
      return false;
    case MethodKind::kUnsafe:
      *out = Value::undefined(
          fmt::format("access to attribute '{}' of '{}' object is unsafe", name, type_name(obj)));
      return true;
    case MethodKind::kSafe: {
      std::string method(name);
      *out = Value::callable(method, [obj, method](Interpreter& in, CallArgs& args) {
        return call_method(in, obj, method, args);
      });
      return true;
    }
  }
  return false;
}

// Python's slice.indices(): the index sequence for a sequence of length n.
Result<std::vector<int64_t>> slice_indices(int64_t n, const Value& start_v, const Value& stop_v,
                                           const Value& step_v) {
  auto as_index = [](const Value& v, int64_t* out) -> Result<bool> {
    if (v.is_none() || v.is_undefined()) return false;
    if (!v.is_int() && !v.is_bool())
      return make_error("slice indices must be integers or None, not {}", type_name(v));
    *out = v.as_integral();
    return true;
  };
  int64_t step = 1;
  TG_ASSIGN(bool has_step, as_index(step_v, &step));
  (void)has_step;
  if (step == 0) return make_error("slice step cannot be zero");
  int64_t start = 0;
  int64_t stop = 0;
  TG_ASSIGN(bool has_start, as_index(start_v, &start));
  TG_ASSIGN(bool has_stop, as_index(stop_v, &stop));
  auto clamp = [&](int64_t i) {
    if (i < 0) {
      i += n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
    return i;
  };
  start = has_start ? clamp(start) : (step < 0 ? n - 1 : 0);
  stop = has_stop ? clamp(stop) : (step < 0 ? -1 : n);
  std::vector<int64_t> idx;
  if (step > 0) {
    for (int64_t i = start; i < stop; i += step) idx.push_back(i);
  } else {
    for (int64_t i = start; i > stop; i += step) idx.push_back(i);
  }
  return idx;
}

}  // namespace

Result<Value> get_attr(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) return undefined_error(obj);
  Value method;
  if (lookup_method(obj, name, &method)) return method;
  if (obj.is_dict()) {
    const Value* v = obj.as_dict().find(name);
    return v ? *v : missing_attribute(obj, name);
  }
  if (obj.is_object()) {
    const Value* v = obj.as_object().attrs->find(name);
    return v ? *v : missing_attribute(obj, name);
  }
  return missing_attribute(obj, name);
}

Result<Value> get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return undefined_error(obj);
  if ((obj.is_indexable_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_integral();
    if (obj.is_list()) {
      const auto n = static_cast<int64_t>(obj.as_list().size());
      if (i < 0) i += n;
      if (i < 0 || i >= n)
        return Value::undefined(fmt::format("list index {} out of range", key.as_integral()));
      return obj.as_list()[static_cast<size_t>(i)];
    }
    const std::u32string cps = decode_utf8(obj.as_string());
    const auto n = static_cast<int64_t>(cps.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n)
      return Value::undefined(fmt::format("string index {} out of range", key.as_integral()));
    std::string one;
    append_utf8(one, cps[static_cast<size_t>(i)]);
    return Value::string(std::move(one));
  }
  if (obj.is_dict()) {
    const Value* v = obj.as_dict().find(key);
    if (v) return *v;
  }
  if (key.is_string()) {
    if (obj.is_object()) {
      const Value* v = obj.as_object().attrs->find(key.as_string());
      if (v) return *v;
    }
    Value method;
    if (lookup_method(obj, key.as_string(), &method)) return method;
    return Value::undefined(
        fmt::format("'{} object' has no attribute '{}'", type_name(obj), key.as_string()));
  }
  return Value::undefined(
      fmt::format("'{}' object has no item {}", type_name(obj), to_py_repr(key)));
}

Result<Value> get_slice(const Value& obj, const Value& start, const Value& stop,
                        const Value& step) {
  if (obj.is_undefined()) return undefined_error(obj);
  if (obj.is_indexable_list()) {
    const List& items = obj.as_list();
    TG_ASSIGN(auto idx, slice_indices(static_cast<int64_t>(items.size()), start, stop, step));
    List out;
    out.reserve(idx.size());
    for (int64_t i : idx) out.push_back(items[static_cast<size_t>(i)]);
    return Value::list(std::move(out), obj.seq());
  }
  if (obj.is_string()) {
    const std::u32string cps = decode_utf8(obj.as_string());
    TG_ASSIGN(auto idx, slice_indices(static_cast<int64_t>(cps.size()), start, stop, step));
    std::string out;
    for (int64_t i : idx) append_utf8(out, cps[static_cast<size_t>(i)]);
    return Value::string(std::move(out));
  }
  // Jinja compiles slices to plain Python subscripts, so this is a TypeError at render time.
  return make_error("'{}' object is not subscriptable with a slice", type_name(obj));
}

Result<Value> get_attribute_path(const Value& obj, std::string_view path) {
  Value cur = obj;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string_view part =
        path.substr(start, dot == std::string_view::npos ? path.npos : dot - start);
    int64_t index = 0;
    const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
    Value next_value;
    if (ec == std::errc() && ptr == part.data() + part.size() && !part.empty()) {
      TG_ASSIGN(next_value, get_item(cur, Value::integer(index)));
    } else {
      TG_ASSIGN(next_value, get_item(cur, Value::string(std::string(part))));
    }
    cur = std::move(next_value);
    if (dot == std::string_view::npos) return cur;
    start = dot + 1;
  }
}

}  // namespace tangram::jinja
