#include "chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "chat/jinja_unicode.h"

namespace tangram::jinja {

namespace {

uint32_t max_child_depth(const List& items) {
  uint32_t depth = 0;
  for (const Value& v : items) depth = std::max(depth, v.depth());
  return depth;
}

uint32_t max_child_depth(const Dict& d) {
  uint32_t depth = 0;
  for (const auto& entry : d.entries()) depth = std::max(depth, entry.second.depth());
  return depth;
}

// Python's hash-equality for scalar keys: 1 == 1.0 == True, strings only equal strings.
bool same_key(const Value& a, const Value& b) {
  if (a.is_string() != b.is_string()) return false;
  return py_equal(a, b);
}

}  // namespace

Value Value::list(ListPtr items, Seq seq) {
  Value v(std::move(items));
  v.depth_ = 1 + max_child_depth(v.as_list());
  v.seq_ = seq;
  return v;
}

Value Value::dict(DictPtr d) {
  Value v(std::move(d));
  v.depth_ = 1 + max_child_depth(v.as_dict());
  return v;
}

Value Value::object(Object o) {
  Value v(std::move(o));
  v.depth_ = 1 + max_child_depth(*v.as_object().attrs);
  return v;
}

const Value* Dict::find(std::string_view key) const {
  const auto it = string_index_.find(key);
  return it == string_index_.end() ? nullptr : &entries_[it->second].second;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  if (!is_hashable_key(key)) return nullptr;
  for (const auto& entry : entries_)
    if (same_key(entry.first, key)) return &entry.second;
  return nullptr;
}

void Dict::set(std::string key, Value value) {
  const auto it = string_index_.find(key);
  if (it != string_index_.end()) {
    entries_[it->second].second = std::move(value);
    return;
  }
  string_index_.emplace(key, entries_.size());
  entries_.emplace_back(Value::string(std::move(key)), std::move(value));
}

Status Dict::set(Value key, Value value) {
  if (key.is_string()) {
    set(key.as_string(), std::move(value));
    return {};
  }
  if (!is_hashable_key(key)) return make_error("unhashable type: '{}'", type_name(key));
  for (auto& entry : entries_) {
    if (same_key(entry.first, key)) {
      entry.second = std::move(value);
      return {};
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
  return {};
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

bool is_hashable_key(const Value& v) {
  if (v.is_list() && v.seq() == Seq::kTuple) {
    for (const Value& x : v.as_list())
      if (!is_hashable_key(x)) return false;
    return true;
  }
  return v.is_string() || v.is_number() || v.is_none();
}

Result<std::string> json_key(const Value& key) {
  switch (key.kind()) {
    case Kind::kString:
      return key.as_string();
    case Kind::kBool:
      return std::string(key.as_bool() ? "true" : "false");
    case Kind::kInt:
      return std::to_string(key.as_int());
    case Kind::kFloat: {
      const double d = key.as_float();
      if (std::isnan(d)) return std::string("NaN");
      if (std::isinf(d)) return std::string(d > 0 ? "Infinity" : "-Infinity");
      return format_py_float(d);
    }
    case Kind::kNone:
      return std::string("null");
    default:
      return make_error("keys must be str, int, float, bool or None, not {}", type_name(key));
  }
}

std::string_view type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      switch (v.seq()) {
        case Seq::kList:
          return "list";
        case Seq::kTuple:
          return "tuple";
        case Seq::kGenerator:
          return "generator";
        case Seq::kDictItems:
          return "dict_items";
        case Seq::kDictKeys:
          return "dict_keys";
        case Seq::kDictValues:
          return "dict_values";
      }
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kObject:
      return v.as_object().type_name;
    case Kind::kCallable:
      return "function";
  }
  return "object";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return v.as_bool();
    case Kind::kInt:
      return v.as_int() != 0;
    case Kind::kFloat:
      return v.as_float() != 0.0;
    case Kind::kString:
      return !v.as_string().empty();
    case Kind::kList:
      return v.seq() == Seq::kGenerator || !v.as_list().empty();
    case Kind::kDict:
      return !v.as_dict().empty();
    case Kind::kObject:
    case Kind::kCallable:
      return true;
  }
  return false;
}

std::string format_py_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, then Python's layout rules (float_repr_style 'short').
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  std::string sign;
  if (!sci.empty() && sci[0] == '-') {
    sign = "-";
    sci.remove_prefix(1);
  }
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos))
    if (c != '.') digits.push_back(c);
  const int exponent = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
  const int decpt = exponent + 1;
  std::string out = sign;
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += exponent < 0 ? "e-" : "e+";
    const std::string mag = std::to_string(std::abs(exponent));
    out += (mag.size() < 2 ? "0" : "") + mag;
  } else if (decpt <= 0) {
    out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
  } else {
    const auto int_digits = static_cast<size_t>(decpt);
    if (digits.size() <= int_digits) {
      out += digits + std::string(int_digits - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, int_digits) + "." + digits.substr(int_digits);
    }
  }
  return out;
}

namespace {

std::string repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : decode_utf8(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (is_py_printable(c)) {
      append_utf8(out, c);
    } else if (c < 0x100) {
      out += fmt::format("\\x{:02x}", static_cast<uint32_t>(c));
    } else if (c < 0x10000) {
      out += fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
    } else {
      out += fmt::format("\\U{:08x}", static_cast<uint32_t>(c));
    }
  }
  out += quote;
  return out;
}

}  // namespace

std::string to_py_repr(const Value& v) {
  switch (v.kind()) {
    case Kind::kString:
      return v.is_markup() ? "Markup(" + repr_string(v.as_string()) + ")"
                           : repr_string(v.as_string());
    case Kind::kList: {
      std::string items;
      bool first = true;
      for (const Value& item : v.as_list()) {
        if (!first) items += ", ";
        first = false;
        items += to_py_repr(item);
      }
      switch (v.seq()) {
        case Seq::kList:
          return "[" + items + "]";
        case Seq::kTuple:
          return "(" + items + (v.as_list().size() == 1 ? ",)" : ")");
        case Seq::kGenerator:
          return "<generator object>";
        case Seq::kDictItems:
          return "dict_items([" + items + "])";
        case Seq::kDictKeys:
          return "dict_keys([" + items + "])";
        case Seq::kDictValues:
          return "dict_values([" + items + "])";
      }
      return items;
    }
    case Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, item] : v.as_dict().entries()) {
        if (!first) out += ", ";
        first = false;
        out += to_py_repr(key) + ": " + to_py_repr(item);
      }
      return out + "}";
    }
    case Kind::kUndefined:
      return "Undefined";
    default:
      return to_py_str(v);
  }
}

std::string to_py_str(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return v.as_bool() ? "True" : "False";
    case Kind::kInt:
      return std::to_string(v.as_int());
    case Kind::kFloat:
      return format_py_float(v.as_float());
    case Kind::kString:
      return v.as_string();
    case Kind::kList:
    case Kind::kDict:
      return to_py_repr(v);
    case Kind::kObject: {
      std::string out = "<" + v.as_object().type_name + " ";
      out += to_py_repr(Value::dict(v.as_object().attrs));
      return out + ">";
    }
    case Kind::kCallable:
      return "<function " + v.as_callable().name + ">";
  }
  return "";
}

bool contains_object(const Value& v) {
  if (v.is_object()) return true;
  if (v.is_list()) {
    for (const Value& x : v.as_list())
      if (contains_object(x)) return true;
  } else if (v.is_dict()) {
    for (const auto& entry : v.as_dict().entries())
      if (contains_object(entry.second)) return true;
  }
  return false;
}

bool py_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_integral() == b.as_integral();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.as_string() == b.as_string();
    case Kind::kList: {
      if (a.seq() != b.seq()) return false;
      if (a.seq() == Seq::kGenerator) return a.list_ptr() == b.list_ptr();  // identity
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!py_equal(x[i], y[i])) return false;
      return true;
    }
    case Kind::kDict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [key, item] : x.entries()) {
        const Value* other = y.find(key);
        if (!other || !py_equal(item, *other)) return false;
      }
      return true;
    }
    case Kind::kObject:
      return a.as_object().attrs == b.as_object().attrs;
    case Kind::kCallable:
      return &a.as_callable() == &b.as_callable();
    default:
      return false;
  }
}

Result<bool> py_less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_integral() < b.as_integral();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_indexable_list() && b.is_indexable_list() && a.seq() == b.seq()) {
    const List& x = a.as_list();
    const List& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (py_equal(x[i], y[i])) continue;
      return py_less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return make_error("'<' not supported between instances of '{}' and '{}'", type_name(a),
                    type_name(b));
}

Result<ListPtr> iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kList:
      return v.list_ptr();
    case Kind::kUndefined:
      return std::make_shared<const List>();
    case Kind::kDict: {
      List keys;
      keys.reserve(v.as_dict().size());
      for (const auto& entry : v.as_dict().entries()) keys.push_back(entry.first);
      return std::make_shared<const List>(std::move(keys));
    }
    case Kind::kString: {
      List chars;
      for (char32_t c : decode_utf8(v.as_string())) {
        std::string one;
        append_utf8(one, c);
        chars.push_back(Value::string(std::move(one)));
      }
      return std::make_shared<const List>(std::move(chars));
    }
    default:
      return make_error("'{}' object is not iterable", type_name(v));
  }
}

Result<int64_t> py_len(const Value& v) {
  switch (v.kind()) {
    case Kind::kString:
      return static_cast<int64_t>(count_code_points(v.as_string()));
    case Kind::kList:
      if (v.seq() == Seq::kGenerator) return make_error("object of type 'generator' has no len()");
      return static_cast<int64_t>(v.as_list().size());
    case Kind::kDict:
      return static_cast<int64_t>(v.as_dict().size());
    case Kind::kUndefined:
      return int64_t{0};
    default:
      return make_error("object of type '{}' has no len()", type_name(v));
  }
}

Result<bool> py_contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kString:
      if (!item.is_string())
        return make_error("'in <string>' requires string as left operand, not {}", type_name(item));
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Kind::kList:
      for (const Value& x : container.as_list())
        if (py_equal(x, item)) return true;
      return false;
    case Kind::kDict:
      if (item.is_undefined()) return false;  // hashable in Python, never a key here
      if (!is_hashable_key(item)) return make_error("unhashable type: '{}'", type_name(item));
      return container.as_dict().find(item) != nullptr;
    case Kind::kUndefined:
      return false;
    default:
      return make_error("argument of type '{}' is not iterable", type_name(container));
  }
}

}  // namespace tangram::jinja
