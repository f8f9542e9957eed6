// Jinja interpreter: walks a parsed template with a context of variables and produces text.
// Scoping follows Jinja2 (for-loop iterations, macros, call/filter/set blocks and `with` get their
// own scope; `if` does not), and every source of unbounded work is metered: loop iterations and
// calls count against a step budget, macro recursion and output size are capped.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_ast.h"
#include "common/result.h"

namespace tangram::jinja {

struct RenderLimits {
  int64_t max_steps = 4'000'000;               // loop iterations, calls and filter element visits
  size_t max_output_bytes = size_t{64} << 20;  // rendered text, and any one string built
  int max_call_depth = 64;                     // nested macro / caller() calls
};

// Deepest container nesting a namespace attribute may hold (keeps recursion in repr, tojson
// and comparisons bounded).
constexpr uint32_t kMaxValueDepth = 160;

class Interpreter {
 public:
  // `fixed_now`: Unix seconds (read as UTC) for strftime_now; nullopt uses the local clock.
  Interpreter(RenderLimits limits, std::optional<int64_t> fixed_now);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders `body` with `context` as the template's variables (over the built-in globals).
  Result<std::string> render(const Body& body, const Dict& context);

  // Services for the built-in filters and functions.
  Status charge(int64_t steps);
  Result<Value> call_value(const Value& callee, CallArgs& args);
  Result<Value> apply_filter(std::string_view name, const Value& input, const CallArgs& args);
  Result<bool> apply_test(std::string_view name, const Value& input, const CallArgs& args);
  std::tm now() const;
  const RenderLimits& limits() const { return limits_; }

 private:
  struct Scope;
  enum class Flow { kNormal, kBreak, kContinue };

  Result<Flow> exec_body(const Body& body, Scope& scope, std::string& out);
  Result<Flow> exec(const Stmt& stmt, Scope& scope, std::string& out);
  Result<Flow> exec_for(const ForStmt& node, int line, Scope& scope, std::string& out);
  Status exec_set(const AssignTarget& target, Value value, int line, Scope& scope);
  Status render_scoped(const Body& body, Scope& parent, std::string& out);
  Result<Value> make_macro(const std::string& name, const MacroParams& params, const Body& body,
                           Scope& scope);
  Result<Value> call_macro(const std::string& name, const MacroParams& params, const Body& body,
                           Scope* defining, CallArgs& args);

  Result<Value> eval(const Expr& e, Scope& scope);
  Result<Value> eval_call(const Expr& e, Scope& scope, const Value* caller);
  Status eval_args(const Expr& e, Scope& scope, CallArgs& args);
  Result<Value> eval_filter(const Expr& filter, Value input, Scope& scope);
  Status append_output(std::string& out, std::string_view text) const;

  Scope& new_scope(Scope* parent);
  void release_scope(Scope& scope);

  RenderLimits limits_;
  std::optional<int64_t> fixed_now_;
  int64_t steps_ = 0;
  int call_depth_ = 0;
  // Scopes live until the render ends when a macro or caller captured them; others are freed
  // as their block finishes.
  std::vector<std::unique_ptr<Scope>> scopes_;
};

}  // namespace tangram::jinja
