// The Jinja interpreter's value model, following Python's semantics as Jinja2 exposes them:
// undefined, none, bool, int, float, str, list, dict (insertion-ordered), attribute objects
// (namespace(), loop) and callables. Lists and dicts are shared and immutable once built, as in
// Hugging Face's immutable sandbox; only namespace attributes can be assigned.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "common/result.h"

namespace tangram::jinja {

class Value;
class Dict;
class Interpreter;

using List = std::vector<Value>;
using ListPtr = std::shared_ptr<const List>;
using DictPtr = std::shared_ptr<Dict>;

// A missing variable, attribute or item. `hint` names it for error messages.
struct Undefined {
  std::string hint;
};
struct None {};
// An attribute bag that is not a mapping (Python's Namespace or LoopContext).
struct Object {
  std::string type_name;  // "namespace", "loop"
  DictPtr attrs;
  bool assignable = false;  // namespace() attributes may be set with {% set ns.x = ... %}
};

// Arguments of one call, as written at the call site.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  int line = 0;
};

using NativeFunction = std::function<Result<Value>(Interpreter&, CallArgs&)>;
struct Callable {
  std::string name;
  NativeFunction fn;
};
using CallablePtr = std::shared_ptr<const Callable>;

enum class Kind {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,
  kDict,
  kObject,
  kCallable
};

// What Python type a kList value stands for. They iterate alike but differ where Python's types
// do: generators (what map/select/... return) are always truthy and have no len(); dict views
// and generators are not JSON serializable or subscriptable; tuples print as (a, b).
enum class Seq : uint8_t { kList, kTuple, kGenerator, kDictItems, kDictKeys, kDictValues };

class Value {
 public:
  Value() : v_(Undefined{}) {}
  static Value undefined(std::string hint) { return Value(Undefined{std::move(hint)}); }
  static Value none() { return Value(None{}); }
  static Value boolean(bool b) { return Value(b); }
  static Value integer(int64_t i) { return Value(i); }
  static Value number(double d) { return Value(d); }
  static Value string(std::string s) { return Value(std::move(s)); }
  // A string marked safe (markupsafe.Markup, from the `safe` and `escape` filters): adding a
  // plain string to it HTML-escapes that string, as Python does.
  static Value markup(std::string s) {
    Value v(std::move(s));
    v.markup_ = true;
    return v;
  }
  static Value list(List items, Seq seq = Seq::kList) {
    return list(std::make_shared<const List>(std::move(items)), seq);
  }
  static Value list(ListPtr items, Seq seq = Seq::kList);
  static Value dict(Dict d);
  static Value dict(DictPtr d);
  static Value object(Object o);
  static Value callable(std::string name, NativeFunction fn) {
    return Value(std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)}));
  }

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  // Python numbers: bool is an int subclass.
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_markup() const { return is_string() && markup_; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_object() const { return kind() == Kind::kObject; }
  bool is_callable() const { return kind() == Kind::kCallable; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  // Integer value of a bool or int (caller checks).
  int64_t as_integral() const { return is_bool() ? (as_bool() ? 1 : 0) : as_int(); }
  // Numeric value of a bool, int or float (caller checks is_number()).
  double as_double() const { return is_float() ? as_float() : static_cast<double>(as_integral()); }
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const List& as_list() const { return *std::get<ListPtr>(v_); }
  const ListPtr& list_ptr() const { return std::get<ListPtr>(v_); }
  Seq seq() const { return seq_; }
  // A list or tuple: indexable, sliceable, with a length.
  bool is_indexable_list() const {
    return is_list() && (seq_ == Seq::kList || seq_ == Seq::kTuple);
  }
  const Dict& as_dict() const { return *std::get<DictPtr>(v_); }
  const DictPtr& dict_ptr() const { return std::get<DictPtr>(v_); }
  const Object& as_object() const { return std::get<Object>(v_); }
  const Callable& as_callable() const { return *std::get<CallablePtr>(v_); }
  const std::string& undefined_hint() const { return std::get<Undefined>(v_).hint; }
  // Container nesting depth when the value was built (scalars 0). Recursive algorithms rely on
  // it being bounded; see Interpreter's checks on namespace assignment.
  uint32_t depth() const { return depth_; }

 private:
  template <typename T>
  requires(!std::is_same_v<std::decay_t<T>, Value>) explicit Value(T v) : v_(std::move(v)) {}
  std::variant<Undefined, None, bool, int64_t, double, std::string, ListPtr, DictPtr, Object,
               CallablePtr>
      v_;
  uint32_t depth_ = 0;
  Seq seq_ = Seq::kList;
  bool markup_ = false;
};

// Insertion-ordered map (Python dicts keep insertion order; tojson relies on it). Keys are
// strings or other hashable scalars (int, float, bool, None); 1, 1.0 and True are one key.
class Dict {
 public:
  const Value* find(std::string_view key) const;
  const Value* find(const Value& key) const;
  // Inserts, or overwrites in place (the key keeps its first position).
  void set(std::string key, Value value);
  // As above for any key; Error for unhashable keys (lists, dicts).
  Status set(Value key, Value value);
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<Value, Value>> entries_;
  std::map<std::string, size_t, std::less<>> string_index_;  // string key -> position
};

inline Value Value::dict(Dict d) { return dict(std::make_shared<Dict>(std::move(d))); }

// Python's type name, for error messages ("str", "list", "dict", "NoneType", ...).
std::string_view type_name(const Value& v);
// Python truthiness.
bool truthy(const Value& v);
// Python str(); undefined renders as "" (Jinja's default Undefined).
std::string to_py_str(const Value& v);
// Python repr().
std::string to_py_repr(const Value& v);
// Python's repr() of a float ("1.0", "0.1", "1e-05", "inf").
std::string format_py_float(double d);
// markupsafe.escape(): & < > ' " as HTML entities.
std::string html_escape(std::string_view s);
// Python-hashable keys: str, int, float, bool, None, and tuples of those.
bool is_hashable_key(const Value& v);
// The JSON object key Python's json.dumps writes for a dict key ("1", "true", "null", ...).
Result<std::string> json_key(const Value& key);
// Whether a namespace or loop object occurs anywhere inside `v`.
bool contains_object(const Value& v);
// Python ==.
bool py_equal(const Value& a, const Value& b);
// Python <: numbers with numbers, strings with strings, lists element-wise. Error otherwise.
Result<bool> py_less(const Value& a, const Value& b);
// The items of a for-loop or of a filter over a sequence: list items, dict keys, string code
// points; undefined iterates as empty. Error for non-iterables.
Result<ListPtr> iterate(const Value& v);
// Python len() for strings (code points), lists and dicts; undefined has length 0.
Result<int64_t> py_len(const Value& v);
// Python's `a in b`.
Result<bool> py_contains(const Value& container, const Value& item);

}  // namespace tangram::jinja
