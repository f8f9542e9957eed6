// Syntax tree of a parsed Jinja template: expressions and statements, each tagged with the
// template line it came from so that render errors can point at it.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "chat/jinja_value.h"

namespace tangram::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  kLiteral,   // literal
  kName,      // name
  kList,      // items
  kTuple,     // items
  kDict,      // items = key0, value0, key1, value1, ...
  kGetAttr,   // a.name
  kGetItem,   // a[b]
  kSlice,     // a[b:c:d], any of b, c, d may be null
  kCall,      // a(items..., kwargs...)
  kFilter,    // a | name(items..., kwargs...); a is null inside {% filter %} / {% set %} blocks
  kTest,      // a is [not] name(items...)
  kNeg,       // -a
  kPos,       // +a
  kNot,       // not a
  kBinary,    // a <name> b for + - * / // % ** ~ and or
  kCompare,   // a <ops[0]> items[0] <ops[1]> items[1] ... (Python chained comparison)
  kCondition  // a if b else c (c may be null)
};

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  int line = 0;
  Value literal;
  std::string name;
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // kCompare: "==", "!=", "<", "<=", ">", ">=", "in", "notin"
  bool negated = false;          // kTest
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// Where a {% set %} / {% for %} / {% with %} stores: plain names (several for unpacking), or
// one attribute of a namespace object.
struct AssignTarget {
  std::vector<std::string> names;
  std::string attribute;  // non-empty: names[0].attribute
  bool unpack = false;    // written as a tuple ("a, b" or "(a,)"), even with one name
};

struct OutputStmt {
  std::string text;
};
struct PrintStmt {
  ExprPtr expr;
};
struct IfStmt {
  std::vector<std::pair<ExprPtr, Body>> branches;  // if / elif
  Body else_body;
};
struct ForStmt {
  AssignTarget target;
  ExprPtr iterable;
  ExprPtr condition;  // for x in y if condition
  Body body;
  Body else_body;
};
struct SetStmt {
  AssignTarget target;
  ExprPtr value;
};
struct SetBlockStmt {
  AssignTarget target;
  std::vector<ExprPtr> filters;  // kFilter with null input, applied in order
  Body body;
};
struct MacroParams {
  std::vector<std::string> names;
  std::vector<ExprPtr> defaults;  // aligned with names; null when none
};
struct MacroStmt {
  std::string name;
  MacroParams params;
  Body body;
};
struct CallBlockStmt {
  ExprPtr call;        // the kCall expression; its callee receives `caller`
  MacroParams params;  // caller(params)
  Body body;
};
struct FilterBlockStmt {
  std::vector<ExprPtr> filters;
  Body body;
};
struct WithStmt {
  std::vector<std::pair<std::string, ExprPtr>> assignments;
  Body body;
};
struct LoopControlStmt {
  bool is_break = false;
};
// {% generation %}: Hugging Face's assistant-mask tag; renders its body in a nested scope.
struct ScopedBodyStmt {
  Body body;
};

struct Stmt {
  int line = 0;
  std::variant<OutputStmt, PrintStmt, IfStmt, ForStmt, SetStmt, SetBlockStmt, MacroStmt,
               CallBlockStmt, FilterBlockStmt, WithStmt, LoopControlStmt, ScopedBodyStmt>
      node;
};

}  // namespace tangram::jinja
