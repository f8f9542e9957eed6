#include "chat/jinja_interpreter.h"

#include <chrono>

#include "chat/jinja_access.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_operators.h"

namespace tangram::jinja {

namespace {

// Prefixes an error with the template line, unless an inner statement already did.
Error located(const Error& e, int line) {
  if (e.message.rfind("line ", 0) == 0) return e;
  return make_error("line {}: {}", line, e.message);
}

template <typename T>
Result<T> at_line(Result<T> r, int line) {
  if (r.ok()) return r;
  return located(r.error(), line);
}

Status at_line(Status s, int line) {
  if (s.ok()) return s;
  return located(s.error(), line);
}

}  // namespace

struct Interpreter::Scope {
  Scope* parent = nullptr;
  std::vector<std::pair<std::string, Value>> vars;
  bool captured = false;  // a macro or caller() defined here may run after the block ends

  const Value* find(std::string_view name) const {
    for (const Scope* s = this; s; s = s->parent)
      for (const auto& [key, value] : s->vars)
        if (key == name) return &value;
    return nullptr;
  }
  void set(const std::string& name, Value v) {
    for (auto& [key, value] : vars) {
      if (key == name) {
        value = std::move(v);
        return;
      }
    }
    vars.emplace_back(name, std::move(v));
  }
  void capture() {
    for (Scope* s = this; s; s = s->parent) s->captured = true;
  }
};

Interpreter::Interpreter(RenderLimits limits, std::optional<int64_t> fixed_now)
    : limits_(limits), fixed_now_(fixed_now) {}

Interpreter::~Interpreter() = default;

Interpreter::Scope& Interpreter::new_scope(Scope* parent) {
  scopes_.push_back(std::make_unique<Scope>());
  scopes_.back()->parent = parent;
  return *scopes_.back();
}

void Interpreter::release_scope(Scope& scope) {
  if (!scope.captured && !scopes_.empty() && scopes_.back().get() == &scope) scopes_.pop_back();
}

Status Interpreter::charge(int64_t steps) {
  steps_ += steps;
  if (steps_ > limits_.max_steps)
    return make_error("template exceeded the work limit of {} steps (loop iterations and calls)",
                      limits_.max_steps);
  return {};
}

Status Interpreter::append_output(std::string& out, std::string_view text) const {
  if (out.size() + text.size() > limits_.max_output_bytes)
    return make_error("rendered output exceeds {} bytes", limits_.max_output_bytes);
  out.append(text);
  return {};
}

std::tm Interpreter::now() const {
  std::tm tm{};
  if (fixed_now_) {
    const auto t = static_cast<std::time_t>(*fixed_now_);
    gmtime_r(&t, &tm);
  } else {
    const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    localtime_r(&t, &tm);
  }
  return tm;
}

Result<std::string> Interpreter::render(const Body& body, const Dict& context) {
  steps_ = 0;
  call_depth_ = 0;
  scopes_.clear();
  Dict globals;
  add_global_functions(globals);
  Scope& global_scope = new_scope(nullptr);
  for (const auto& [key, value] : globals.entries()) global_scope.set(key.as_string(), value);
  Scope& context_scope = new_scope(&global_scope);
  for (const auto& [key, value] : context.entries()) {
    if (!key.is_string()) return make_error("context keys must be strings");
    context_scope.set(key.as_string(), value);
  }
  Scope& top = new_scope(&context_scope);
  std::string out;
  TG_ASSIGN(Flow flow, exec_body(body, top, out));
  (void)flow;
  scopes_.clear();
  return out;
}

// ---- statements ----------------------------------------------------------------------------

Result<Interpreter::Flow> Interpreter::exec_body(const Body& body, Scope& scope, std::string& out) {
  for (const StmtPtr& stmt : body) {
    TG_ASSIGN(Flow flow, exec(*stmt, scope, out));
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Status Interpreter::render_scoped(const Body& body, Scope& parent, std::string& out) {
  Scope& scope = new_scope(&parent);
  auto flow = exec_body(body, scope, out);
  release_scope(scope);
  if (!flow.ok()) return flow.error();
  return {};
}

Result<Interpreter::Flow> Interpreter::exec(const Stmt& stmt, Scope& scope, std::string& out) {
  const int line = stmt.line;
  if (const auto* n = std::get_if<OutputStmt>(&stmt.node)) {
    TG_TRY(at_line(append_output(out, n->text), line));
    return Flow::kNormal;
  }
  if (const auto* n = std::get_if<PrintStmt>(&stmt.node)) {
    TG_ASSIGN(Value v, eval(*n->expr, scope));
    TG_TRY(at_line(append_output(out, to_py_str(v)), line));
    return Flow::kNormal;
  }
  if (const auto* n = std::get_if<IfStmt>(&stmt.node)) {
    for (const auto& [cond, body] : n->branches) {
      TG_ASSIGN(Value c, eval(*cond, scope));
      if (truthy(c)) return exec_body(body, scope, out);
    }
    return exec_body(n->else_body, scope, out);
  }
  if (const auto* n = std::get_if<ForStmt>(&stmt.node)) return exec_for(*n, line, scope, out);
  if (const auto* n = std::get_if<SetStmt>(&stmt.node)) {
    TG_ASSIGN(Value v, eval(*n->value, scope));
    TG_TRY(exec_set(n->target, std::move(v), line, scope));
    return Flow::kNormal;
  }
  if (const auto* n = std::get_if<SetBlockStmt>(&stmt.node)) {
    std::string text;
    TG_TRY(render_scoped(n->body, scope, text));
    Value v = Value::string(std::move(text));
    for (const ExprPtr& f : n->filters) {
      TG_ASSIGN(v, eval_filter(*f, std::move(v), scope));
    }
    TG_TRY(exec_set(n->target, std::move(v), line, scope));
    return Flow::kNormal;
  }
  if (const auto* n = std::get_if<MacroStmt>(&stmt.node)) {
    TG_ASSIGN(Value macro, make_macro(n->name, n->params, n->body, scope));
    scope.set(n->name, std::move(macro));
    return Flow::kNormal;
  }
  if (const auto* n = std::get_if<CallBlockStmt>(&stmt.node)) {
    TG_ASSIGN(Value caller, make_macro("caller", n->params, n->body, scope));
    TG_ASSIGN(Value v, eval_call(*n->call, scope, &caller));
    TG_TRY(at_line(append_output(out, to_py_str(v)), line));
    return Flow::kNormal;
  }
  if (const auto* n = std::get_if<FilterBlockStmt>(&stmt.node)) {
    std::string text;
    TG_TRY(render_scoped(n->body, scope, text));
    Value v = Value::string(std::move(text));
    for (const ExprPtr& f : n->filters) {
      TG_ASSIGN(v, eval_filter(*f, std::move(v), scope));
    }
    TG_TRY(at_line(append_output(out, to_py_str(v)), line));
    return Flow::kNormal;
  }
  if (const auto* n = std::get_if<WithStmt>(&stmt.node)) {
    std::vector<Value> values;
    for (const auto& assignment : n->assignments) {
      TG_ASSIGN(Value v, eval(*assignment.second, scope));
      values.push_back(std::move(v));
    }
    Scope& inner = new_scope(&scope);
    for (size_t i = 0; i < values.size(); ++i)
      inner.set(n->assignments[i].first, std::move(values[i]));
    auto flow = exec_body(n->body, inner, out);
    release_scope(inner);
    return flow;
  }
  if (const auto* n = std::get_if<LoopControlStmt>(&stmt.node))
    return n->is_break ? Flow::kBreak : Flow::kContinue;
  if (const auto* n = std::get_if<ScopedBodyStmt>(&stmt.node)) {
    TG_TRY(render_scoped(n->body, scope, out));
    return Flow::kNormal;
  }
  return make_error("line {}: internal error: unknown statement", line);
}

Status Interpreter::exec_set(const AssignTarget& target, Value value, int line, Scope& scope) {
  if (!target.attribute.empty()) {
    const Value* ns = scope.find(target.names[0]);
    if (!ns || !ns->is_object() || !ns->as_object().assignable)
      return make_error("line {}: cannot assign attribute '{}' on '{}': it is not a namespace()",
                        line, target.attribute, target.names[0]);
    if (value.depth() > kMaxValueDepth)
      return make_error("line {}: value nested deeper than {} levels", line, kMaxValueDepth);
    if (contains_object(value))
      return make_error("line {}: a namespace attribute cannot hold a namespace or loop object",
                        line);
    ns->as_object().attrs->set(target.attribute, std::move(value));
    return {};
  }
  if (!target.unpack) {
    scope.set(target.names[0], std::move(value));
    return {};
  }
  TG_ASSIGN(ListPtr items, at_line(iterate(value), line));
  if (items->size() != target.names.size())
    return make_error("line {}: cannot unpack {} values into {} names", line, items->size(),
                      target.names.size());
  for (size_t i = 0; i < items->size(); ++i) scope.set(target.names[i], (*items)[i]);
  return {};
}

Result<Interpreter::Flow> Interpreter::exec_for(const ForStmt& node, int line, Scope& scope,
                                                std::string& out) {
  TG_ASSIGN(Value iterable, eval(*node.iterable, scope));
  TG_ASSIGN(ListPtr items, at_line(iterate(iterable), line));
  if (node.condition) {
    List kept;
    for (const Value& item : *items) {
      TG_TRY(at_line(charge(1), line));
      Scope& probe = new_scope(&scope);
      Status bound = exec_set(node.target, item, line, probe);
      Result<Value> keep = bound.ok() ? eval(*node.condition, probe) : Result<Value>(bound.error());
      release_scope(probe);
      if (!keep.ok()) return keep.error();
      if (truthy(keep.value())) kept.push_back(item);
    }
    items = std::make_shared<const List>(std::move(kept));
  }
  const auto n = static_cast<int64_t>(items->size());
  if (n == 0) {
    TG_TRY(render_scoped(node.else_body, scope, out));
    return Flow::kNormal;
  }
  // One loop object, updated in place each iteration, like Jinja's LoopContext.
  auto loop = std::make_shared<Dict>();
  loop->set("length", Value::integer(n));
  loop->set("depth", Value::integer(1));
  loop->set("depth0", Value::integer(0));
  std::weak_ptr<Dict> loop_ref = loop;
  loop->set(
      "cycle",
      Value::callable("loop.cycle", [loop_ref](Interpreter&, CallArgs& args) -> Result<Value> {
        if (args.positional.empty()) return make_error("no items for cycling given");
        const auto attrs = loop_ref.lock();
        const Value* index0 = attrs ? attrs->find("index0") : nullptr;
        if (!index0 || !index0->is_int()) return make_error("loop.cycle() used outside its loop");
        return args.positional[static_cast<size_t>(index0->as_int()) % args.positional.size()];
      }));
  const Value loop_value = Value::object(Object{"LoopContext", loop, false});
  for (int64_t i = 0; i < n; ++i) {
    TG_TRY(at_line(charge(1), line));
    Scope& iteration = new_scope(&scope);
    Status bound = exec_set(node.target, (*items)[static_cast<size_t>(i)], line, iteration);
    if (!bound.ok()) {
      release_scope(iteration);
      return bound.error();
    }
    loop->set("index", Value::integer(i + 1));
    loop->set("index0", Value::integer(i));
    loop->set("revindex", Value::integer(n - i));
    loop->set("revindex0", Value::integer(n - i - 1));
    loop->set("first", Value::boolean(i == 0));
    loop->set("last", Value::boolean(i == n - 1));
    loop->set("previtem", i > 0 ? (*items)[static_cast<size_t>(i - 1)]
                                : Value::undefined("there is no previous item"));
    loop->set("nextitem", i + 1 < n ? (*items)[static_cast<size_t>(i + 1)]
                                    : Value::undefined("there is no next item"));
    iteration.set("loop", loop_value);
    auto flow = exec_body(node.body, iteration, out);
    release_scope(iteration);
    if (!flow.ok()) return flow.error();
    if (flow.value() == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

// ---- macros ----------------------------------------------------------------------------------

Result<Value> Interpreter::make_macro(const std::string& name, const MacroParams& params,
                                      const Body& body, Scope& scope) {
  scope.capture();
  Scope* defining = &scope;
  const MacroParams* p = &params;
  const Body* b = &body;
  return Value::callable(name, [name, p, b, defining](Interpreter& in, CallArgs& args) {
    return in.call_macro(name, *p, *b, defining, args);
  });
}

Result<Value> Interpreter::call_macro(const std::string& name, const MacroParams& params,
                                      const Body& body, Scope* defining, CallArgs& args) {
  if (call_depth_ >= limits_.max_call_depth)
    return make_error("macro '{}' nested deeper than {} calls", name, limits_.max_call_depth);
  TG_TRY(charge(1));
  if (args.positional.size() > params.names.size())
    return make_error("macro '{}' takes not more than {} argument(s)", name, params.names.size());
  Scope& scope = new_scope(defining);
  std::vector<bool> bound(params.names.size(), false);
  for (size_t i = 0; i < args.positional.size(); ++i) {
    scope.set(params.names[i], std::move(args.positional[i]));
    bound[i] = true;
  }
  Status status;
  for (auto& [key, value] : args.keyword) {
    size_t k = 0;
    while (k < params.names.size() && params.names[k] != key) ++k;
    if (k < params.names.size()) {
      if (bound[k]) {
        status = make_error("macro '{}' got multiple values for argument '{}'", name, key);
        break;
      }
      bound[k] = true;
      scope.set(key, std::move(value));
    } else if (key == "caller") {
      scope.set(key, std::move(value));
    } else {
      status = make_error("macro '{}' takes no keyword argument '{}'", name, key);
      break;
    }
  }
  for (size_t k = 0; k < params.names.size() && status.ok(); ++k) {
    if (bound[k]) continue;
    if (params.defaults[k]) {
      auto v = eval(*params.defaults[k], scope);
      if (!v.ok()) {
        status = v.error();
        break;
      }
      scope.set(params.names[k], std::move(v.value()));
    } else {
      scope.set(params.names[k],
                Value::undefined(fmt::format("'{}' is undefined", params.names[k])));
    }
  }
  std::string out;
  if (status.ok()) {
    ++call_depth_;
    auto flow = exec_body(body, scope, out);
    --call_depth_;
    if (!flow.ok()) status = flow.error();
  }
  release_scope(scope);
  if (!status.ok()) return status.error();
  return Value::string(std::move(out));
}

Result<Value> Interpreter::call_value(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) return undefined_error(callee);
  if (!callee.is_callable()) return make_error("'{}' object is not callable", type_name(callee));
  return callee.as_callable().fn(*this, args);
}

Result<Value> Interpreter::apply_filter(std::string_view name, const Value& input,
                                        const CallArgs& args) {
  const FilterFn fn = find_filter(name);
  if (!fn) return make_error("no filter named '{}'", name);
  auto r = fn(*this, input, args);
  if (!r.ok() && r.message().rfind("line ", 0) != 0)
    return make_error("filter '{}': {}", name, r.message());
  return r;
}

Result<bool> Interpreter::apply_test(std::string_view name, const Value& input,
                                     const CallArgs& args) {
  const TestFn fn = find_test(name);
  if (!fn) return make_error("no test named '{}'", name);
  return fn(*this, input, args);
}

// ---- expressions -----------------------------------------------------------------------------

Status Interpreter::eval_args(const Expr& e, Scope& scope, CallArgs& args) {
  args.line = e.line;
  for (const ExprPtr& item : e.items) {
    TG_ASSIGN(Value v, eval(*item, scope));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [key, expr] : e.kwargs) {
    TG_ASSIGN(Value v, eval(*expr, scope));
    args.keyword.emplace_back(key, std::move(v));
  }
  return {};
}

Result<Value> Interpreter::eval_filter(const Expr& filter, Value input, Scope& scope) {
  CallArgs args;
  TG_TRY(eval_args(filter, scope, args));
  return at_line(apply_filter(filter.name, input, args), filter.line);
}

Result<Value> Interpreter::eval_call(const Expr& e, Scope& scope, const Value* caller) {
  // obj.method(...) calls the method directly instead of materialising a bound callable.
  if (e.a->kind == ExprKind::kGetAttr) {
    TG_ASSIGN(Value obj, eval(*e.a->a, scope));
    if (method_kind(obj, e.a->name) == MethodKind::kSafe) {
      CallArgs args;
      TG_TRY(eval_args(e, scope, args));
      TG_TRY(at_line(charge(1), e.line));
      return at_line(call_method(*this, obj, e.a->name, args), e.line);
    }
    TG_ASSIGN(Value callee, at_line(get_attr(obj, e.a->name), e.line));
    CallArgs args;
    TG_TRY(eval_args(e, scope, args));
    if (caller) args.keyword.emplace_back("caller", *caller);
    return at_line(call_value(callee, args), e.line);
  }
  TG_ASSIGN(Value callee, eval(*e.a, scope));
  CallArgs args;
  TG_TRY(eval_args(e, scope, args));
  if (caller) args.keyword.emplace_back("caller", *caller);
  return at_line(call_value(callee, args), e.line);
}

Result<Value> Interpreter::eval(const Expr& e, Scope& scope) {
  switch (e.kind) {
    case ExprKind::kLiteral:
      return e.literal;
    case ExprKind::kName: {
      const Value* v = scope.find(e.name);
      if (v) return *v;
      return Value::undefined(fmt::format("'{}' is undefined", e.name));
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      List items;
      items.reserve(e.items.size());
      for (const ExprPtr& item : e.items) {
        TG_ASSIGN(Value v, eval(*item, scope));
        items.push_back(std::move(v));
      }
      return Value::list(std::move(items), e.kind == ExprKind::kTuple ? Seq::kTuple : Seq::kList);
    }
    case ExprKind::kDict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        TG_ASSIGN(Value key, eval(*e.items[i], scope));
        TG_ASSIGN(Value value, eval(*e.items[i + 1], scope));
        TG_TRY(at_line(d.set(std::move(key), std::move(value)), e.line));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::kGetAttr: {
      TG_ASSIGN(Value obj, eval(*e.a, scope));
      return at_line(get_attr(obj, e.name), e.line);
    }
    case ExprKind::kGetItem: {
      TG_ASSIGN(Value obj, eval(*e.a, scope));
      TG_ASSIGN(Value key, eval(*e.b, scope));
      return at_line(get_item(obj, key), e.line);
    }
    case ExprKind::kSlice: {
      TG_ASSIGN(Value obj, eval(*e.a, scope));
      Value bounds[3];
      for (size_t i = 0; i < 3; ++i) {
        if (!e.items[i]) continue;
        TG_ASSIGN(bounds[i], eval(*e.items[i], scope));
      }
      return at_line(get_slice(obj, bounds[0], bounds[1], bounds[2]), e.line);
    }
    case ExprKind::kCall:
      return eval_call(e, scope, nullptr);
    case ExprKind::kFilter: {
      TG_ASSIGN(Value input, eval(*e.a, scope));
      return eval_filter(e, std::move(input), scope);
    }
    case ExprKind::kTest: {
      TG_ASSIGN(Value input, eval(*e.a, scope));
      CallArgs args;
      TG_TRY(eval_args(e, scope, args));
      TG_ASSIGN(bool r, at_line(apply_test(e.name, input, args), e.line));
      return Value::boolean(r != e.negated);
    }
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      TG_ASSIGN(Value v, eval(*e.a, scope));
      return at_line(unary_op(e.kind == ExprKind::kNeg, v), e.line);
    }
    case ExprKind::kNot: {
      TG_ASSIGN(Value v, eval(*e.a, scope));
      return Value::boolean(!truthy(v));
    }
    case ExprKind::kBinary: {
      TG_ASSIGN(Value lhs, eval(*e.a, scope));
      if (e.name == "and") return truthy(lhs) ? eval(*e.b, scope) : lhs;
      if (e.name == "or") return truthy(lhs) ? lhs : eval(*e.b, scope);
      TG_ASSIGN(Value rhs, eval(*e.b, scope));
      return at_line(binary_op(e.name, lhs, rhs, limits_.max_output_bytes), e.line);
    }
    case ExprKind::kCompare: {
      TG_ASSIGN(Value lhs, eval(*e.a, scope));
      for (size_t i = 0; i < e.ops.size(); ++i) {
        TG_ASSIGN(Value rhs, eval(*e.items[i], scope));
        TG_ASSIGN(bool r, at_line(compare_op(e.ops[i], lhs, rhs), e.line));
        if (!r) return Value::boolean(false);
        lhs = std::move(rhs);
      }
      return Value::boolean(true);
    }
    case ExprKind::kCondition: {
      TG_ASSIGN(Value cond, eval(*e.b, scope));
      if (truthy(cond)) return eval(*e.a, scope);
      if (e.c) return eval(*e.c, scope);
      return Value::undefined("the inline if-expression evaluated to false and has no else");
    }
  }
  return make_error("line {}: internal error: unknown expression", e.line);
}

}  // namespace tangram::jinja
