#include "chat/jinja_parser.h"

#include <algorithm>
#include <initializer_list>
#include <string_view>

namespace tangram::jinja {

namespace {

bool in_list(std::string_view s, std::initializer_list<std::string_view> list) {
  for (std::string_view x : list)
    if (s == x) return true;
  return false;
}

std::string describe(const Token& t) {
  switch (t.type) {
    case TokenType::kData:
      return "template text";
    case TokenType::kVariableBegin:
      return "'{{'";
    case TokenType::kVariableEnd:
      return "'}}'";
    case TokenType::kBlockBegin:
      return "'{%'";
    case TokenType::kBlockEnd:
      return "'%}'";
    case TokenType::kName:
      return "'" + t.text + "'";
    case TokenType::kString:
      return "string literal";
    case TokenType::kInteger:
    case TokenType::kFloat:
      return "number " + t.text;
    case TokenType::kOperator:
      return "'" + t.text + "'";
    case TokenType::kEnd:
      return "end of template";
  }
  return "token";
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : toks_(tokens) {}

  Result<Body> parse_all() {
    std::string found;
    TG_ASSIGN(Body body, subparse({}, &found));
    return body;
  }

 private:
  // Tracks recursion so deeply nested input yields an Error instead of a stack overflow.
  struct DepthGuard {
    explicit DepthGuard(int& d) : depth(d) { ++depth; }
    ~DepthGuard() { --depth; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;
    int& depth;
  };

  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t ahead = 1) const {
    return toks_[std::min(pos_ + ahead, toks_.size() - 1)];
  }
  void next() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  bool is_op(std::string_view op) const {
    return cur().type == TokenType::kOperator && cur().text == op;
  }
  bool is_name(std::string_view n) const {
    return cur().type == TokenType::kName && cur().text == n;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }

  Error fail(std::string_view what) const {
    return make_error("line {}: {}, got {}", cur().line, what, describe(cur()));
  }
  Status expect_op(std::string_view op) {
    if (!skip_op(op)) return fail(fmt::format("expected '{}'", op));
    return {};
  }
  Result<std::string> expect_name() {
    if (cur().type != TokenType::kName) return fail("expected a name");
    std::string n = cur().text;
    next();
    return n;
  }
  Status expect_block_end() {
    if (cur().type != TokenType::kBlockEnd) return fail("expected '%}'");
    next();
    return {};
  }
  Status check_depth() const {
    if (depth_ > kMaxParseDepth)
      return make_error("line {}: template nested too deeply (limit {})", cur().line,
                        kMaxParseDepth);
    return {};
  }

  ExprPtr make(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // ---- statements -------------------------------------------------------------------------

  // Parses until a block tag whose name is in `end_names` (left unconsumed, its name stored in
  // *found) or the end of the template (only allowed when end_names is empty).
  Result<Body> subparse(std::initializer_list<std::string_view> end_names, std::string* found) {
    DepthGuard guard(depth_);
    TG_TRY(check_depth());
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == TokenType::kEnd) {
        if (end_names.size() == 0) return body;
        std::string wanted;
        for (std::string_view n : end_names)
          wanted += (wanted.empty() ? "'" : " or '") + std::string(n) + "'";
        return make_error("line {}: unexpected end of template, expected {}", t.line, wanted);
      }
      if (t.type == TokenType::kData) {
        auto s = std::make_unique<Stmt>();
        s->line = t.line;
        s->node = OutputStmt{t.text};
        body.push_back(std::move(s));
        next();
        continue;
      }
      if (t.type == TokenType::kVariableBegin) {
        const int line = t.line;
        next();
        TG_ASSIGN(ExprPtr e, parse_tuple(true, false, {}));
        if (cur().type != TokenType::kVariableEnd) return fail("expected '}}'");
        next();
        auto s = std::make_unique<Stmt>();
        s->line = line;
        s->node = PrintStmt{std::move(e)};
        body.push_back(std::move(s));
        continue;
      }
      if (t.type != TokenType::kBlockBegin) return fail("unexpected token");
      const Token& tag = peek();
      if (tag.type == TokenType::kName && in_list(tag.text, end_names)) {
        next();  // the '{%'; the name stays for the caller
        *found = tag.text;
        return body;
      }
      next();
      TG_ASSIGN(StmtPtr s, parse_statement());
      body.push_back(std::move(s));
    }
  }

  // After a nested body's end tag: consume its name and the closing '%}'.
  Status close_tag() {
    next();
    return expect_block_end();
  }

  Result<StmtPtr> parse_statement() {
    if (cur().type != TokenType::kName) return fail("expected a tag name");
    const std::string tag = cur().text;
    const int line = cur().line;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    next();
    if (tag == "if") {
      TG_ASSIGN(s->node, parse_if());
    } else if (tag == "for") {
      TG_ASSIGN(s->node, parse_for());
    } else if (tag == "set") {
      TG_ASSIGN(auto node, parse_set());
      std::visit([&](auto&& n) { s->node = std::move(n); }, std::move(node));
    } else if (tag == "macro") {
      TG_ASSIGN(s->node, parse_macro());
    } else if (tag == "call") {
      TG_ASSIGN(s->node, parse_call_block());
    } else if (tag == "filter") {
      TG_ASSIGN(s->node, parse_filter_block());
    } else if (tag == "with") {
      TG_ASSIGN(s->node, parse_with());
    } else if (tag == "generation") {
      TG_TRY(expect_block_end());
      std::string found;
      TG_ASSIGN(Body body, subparse({"endgeneration"}, &found));
      TG_TRY(close_tag());
      s->node = ScopedBodyStmt{std::move(body)};
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) return make_error("line {}: '{}' outside a for loop", line, tag);
      TG_TRY(expect_block_end());
      s->node = LoopControlStmt{tag == "break"};
    } else if (in_list(tag, {"include", "import", "from", "extends", "block", "do", "autoescape",
                             "trans", "pluralize", "debug"})) {
      return make_error("line {}: the '{{% {} %}}' tag is not supported", line, tag);
    } else if (in_list(tag, {"endif", "elif", "else", "endfor", "endset", "endmacro", "endcall",
                             "endfilter", "endwith", "endgeneration", "endraw", "endblock"})) {
      return make_error("line {}: unexpected '{{% {} %}}' without a matching opening tag", line,
                        tag);
    } else {
      return make_error("line {}: unknown tag '{}'", line, tag);
    }
    return s;
  }

  Result<IfStmt> parse_if() {
    IfStmt node;
    TG_ASSIGN(ExprPtr cond, parse_tuple(false, false, {}));
    TG_TRY(expect_block_end());
    while (true) {
      std::string found;
      TG_ASSIGN(Body body, subparse({"elif", "else", "endif"}, &found));
      node.branches.emplace_back(std::move(cond), std::move(body));
      next();  // the tag name
      if (found == "elif") {
        TG_ASSIGN(cond, parse_tuple(false, false, {}));
        TG_TRY(expect_block_end());
        continue;
      }
      TG_TRY(expect_block_end());
      if (found == "else") {
        TG_ASSIGN(node.else_body, subparse({"endif"}, &found));
        TG_TRY(close_tag());
      }
      return node;
    }
  }

  Result<ForStmt> parse_for() {
    ForStmt node;
    TG_ASSIGN(node.target, parse_assign_target(false, {"in"}));
    if (!skip_name("in")) return fail("expected 'in'");
    TG_ASSIGN(node.iterable, parse_tuple(false, false, {"recursive"}));
    if (skip_name("if")) {
      TG_ASSIGN(node.condition, parse_expression(true));
    }
    if (is_name("recursive"))
      return make_error("line {}: recursive for loops are not supported", cur().line);
    TG_TRY(expect_block_end());
    ++loop_depth_;
    std::string found;
    auto body = subparse({"endfor", "else"}, &found);
    --loop_depth_;
    if (!body.ok()) return body.error();
    node.body = std::move(body.value());
    next();
    TG_TRY(expect_block_end());
    if (found == "else") {
      TG_ASSIGN(node.else_body, subparse({"endfor"}, &found));
      TG_TRY(close_tag());
    }
    return node;
  }

  Result<std::variant<SetStmt, SetBlockStmt>> parse_set() {
    TG_ASSIGN(AssignTarget target, parse_assign_target(true, {}));
    if (skip_op("=")) {
      TG_ASSIGN(ExprPtr value, parse_tuple(true, false, {}));
      TG_TRY(expect_block_end());
      using SetNode = std::variant<SetStmt, SetBlockStmt>;
      return SetNode(SetStmt{std::move(target), std::move(value)});
    }
    SetBlockStmt node;
    node.target = std::move(target);
    TG_ASSIGN(node.filters, parse_filter_chain(false));
    TG_TRY(expect_block_end());
    std::string found;
    TG_ASSIGN(node.body, subparse({"endset"}, &found));
    TG_TRY(close_tag());
    return std::variant<SetStmt, SetBlockStmt>(std::move(node));
  }

  Result<MacroParams> parse_signature() {
    MacroParams params;
    TG_TRY(expect_op("("));
    while (!is_op(")")) {
      if (!params.names.empty()) TG_TRY(expect_op(","));
      if (is_op(")")) break;
      TG_ASSIGN(std::string name, expect_name());
      ExprPtr def;
      if (skip_op("=")) {
        TG_ASSIGN(def, parse_expression(true));
      }
      params.names.push_back(std::move(name));
      params.defaults.push_back(std::move(def));
    }
    next();
    return params;
  }

  Result<MacroStmt> parse_macro() {
    MacroStmt node;
    TG_ASSIGN(node.name, expect_name());
    TG_ASSIGN(node.params, parse_signature());
    TG_TRY(expect_block_end());
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;  // break/continue cannot cross a macro boundary
    std::string found;
    auto body = subparse({"endmacro"}, &found);
    loop_depth_ = saved_loops;
    if (!body.ok()) return body.error();
    node.body = std::move(body.value());
    next();
    if (cur().type == TokenType::kName) next();  // {% endmacro name %}
    TG_TRY(expect_block_end());
    return node;
  }

  Result<CallBlockStmt> parse_call_block() {
    CallBlockStmt node;
    if (is_op("(")) {
      TG_ASSIGN(node.params, parse_signature());
    }
    TG_ASSIGN(node.call, parse_expression(true));
    if (node.call->kind != ExprKind::kCall)
      return make_error("line {}: expected a call after 'call'", node.call->line);
    TG_TRY(expect_block_end());
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    std::string found;
    auto body = subparse({"endcall"}, &found);
    loop_depth_ = saved_loops;
    if (!body.ok()) return body.error();
    node.body = std::move(body.value());
    TG_TRY(close_tag());
    return node;
  }

  Result<FilterBlockStmt> parse_filter_block() {
    FilterBlockStmt node;
    TG_ASSIGN(node.filters, parse_filter_chain(true));
    TG_TRY(expect_block_end());
    std::string found;
    TG_ASSIGN(node.body, subparse({"endfilter"}, &found));
    TG_TRY(close_tag());
    return node;
  }

  Result<WithStmt> parse_with() {
    WithStmt node;
    while (cur().type != TokenType::kBlockEnd) {
      if (!node.assignments.empty()) TG_TRY(expect_op(","));
      TG_ASSIGN(std::string name, expect_name());
      TG_TRY(expect_op("="));
      TG_ASSIGN(ExprPtr value, parse_expression(true));
      node.assignments.emplace_back(std::move(name), std::move(value));
    }
    next();
    std::string found;
    TG_ASSIGN(node.body, subparse({"endwith"}, &found));
    TG_TRY(close_tag());
    return node;
  }

  // A set/for/with target: `name`, `ns.attr` (when allowed), or a tuple of names.
  Result<AssignTarget> parse_assign_target(bool allow_namespace,
                                           std::initializer_list<std::string_view> end_names) {
    AssignTarget target;
    if (allow_namespace && cur().type == TokenType::kName && peek().type == TokenType::kOperator &&
        peek().text == ".") {
      target.names.push_back(cur().text);
      next();
      next();
      TG_ASSIGN(target.attribute, expect_name());
      return target;
    }
    const bool parenthesized = skip_op("(");
    while (true) {
      if (cur().type != TokenType::kName || in_list(cur().text, end_names))
        return fail("expected a variable name to assign to");
      target.names.push_back(cur().text);
      next();
      if (!skip_op(",")) break;
      target.unpack = true;
      if (is_op(")") || is_op("=") ||
          (cur().type == TokenType::kName && in_list(cur().text, end_names)))
        break;
    }
    if (parenthesized) {
      TG_TRY(expect_op(")"));
      target.unpack = true;
    }
    for (const std::string& n : target.names)
      if (in_list(n, {"true", "false", "none", "True", "False", "None"}))
        return make_error("line {}: cannot assign to '{}'", cur().line, n);
    return target;
  }

  // ---- expressions ------------------------------------------------------------------------

  bool at_tuple_end(std::initializer_list<std::string_view> extra_end) const {
    const Token& t = cur();
    if (t.type == TokenType::kVariableEnd || t.type == TokenType::kBlockEnd ||
        t.type == TokenType::kEnd)
      return true;
    if (t.type == TokenType::kOperator && t.text == ")") return true;
    return t.type == TokenType::kName && in_list(t.text, extra_end);
  }

  Result<ExprPtr> parse_tuple(bool with_condexpr, bool explicit_parentheses,
                              std::initializer_list<std::string_view> extra_end) {
    const int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) TG_TRY(expect_op(","));
      if (at_tuple_end(extra_end)) break;
      TG_ASSIGN(ExprPtr e, parse_expression(with_condexpr));
      items.push_back(std::move(e));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parentheses) return fail("expected an expression");
    }
    ExprPtr t = make(ExprKind::kTuple, line);
    t->items = std::move(items);
    return t;
  }

  Result<ExprPtr> parse_expression(bool with_condexpr) {
    DepthGuard guard(depth_);
    TG_TRY(check_depth());
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  Result<ExprPtr> parse_condexpr() {
    const int line = cur().line;
    TG_ASSIGN(ExprPtr expr, parse_or());
    while (skip_name("if")) {
      TG_ASSIGN(ExprPtr cond, parse_or());
      ExprPtr else_expr;
      if (skip_name("else")) {
        DepthGuard guard(depth_);
        TG_TRY(check_depth());
        TG_ASSIGN(else_expr, parse_condexpr());
      }
      ExprPtr node = make(ExprKind::kCondition, line);
      node->a = std::move(expr);
      node->b = std::move(cond);
      node->c = std::move(else_expr);
      expr = std::move(node);
    }
    return expr;
  }

  ExprPtr binary(std::string op, ExprPtr lhs, ExprPtr rhs, int line) {
    ExprPtr node = make(ExprKind::kBinary, line);
    node->name = std::move(op);
    node->a = std::move(lhs);
    node->b = std::move(rhs);
    return node;
  }

  Result<ExprPtr> parse_or() {
    const int line = cur().line;
    TG_ASSIGN(ExprPtr left, parse_and());
    while (skip_name("or")) {
      TG_ASSIGN(ExprPtr right, parse_and());
      left = binary("or", std::move(left), std::move(right), line);
    }
    return left;
  }

  Result<ExprPtr> parse_and() {
    const int line = cur().line;
    TG_ASSIGN(ExprPtr left, parse_not());
    while (skip_name("and")) {
      TG_ASSIGN(ExprPtr right, parse_not());
      left = binary("and", std::move(left), std::move(right), line);
    }
    return left;
  }

  Result<ExprPtr> parse_not() {
    if (is_name("not")) {
      const int line = cur().line;
      next();
      DepthGuard guard(depth_);
      TG_TRY(check_depth());
      TG_ASSIGN(ExprPtr operand, parse_not());
      ExprPtr node = make(ExprKind::kNot, line);
      node->a = std::move(operand);
      return node;
    }
    return parse_compare();
  }

  Result<ExprPtr> parse_compare() {
    const int line = cur().line;
    TG_ASSIGN(ExprPtr first, parse_math1());
    ExprPtr node;
    while (true) {
      std::string op;
      if (cur().type == TokenType::kOperator &&
          in_list(cur().text, {"==", "!=", "<", "<=", ">", ">="})) {
        op = cur().text;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && peek().type == TokenType::kName && peek().text == "in") {
        op = "notin";
        next();
        next();
      } else {
        break;
      }
      TG_ASSIGN(ExprPtr operand, parse_math1());
      if (!node) {
        node = make(ExprKind::kCompare, line);
        node->a = std::move(first);
      }
      node->ops.push_back(std::move(op));
      node->items.push_back(std::move(operand));
    }
    return node ? std::move(node) : std::move(first);
  }

  Result<ExprPtr> parse_math1() {
    const int line = cur().line;
    TG_ASSIGN(ExprPtr left, parse_concat());
    while (is_op("+") || is_op("-")) {
      std::string op = cur().text;
      next();
      TG_ASSIGN(ExprPtr right, parse_concat());
      left = binary(std::move(op), std::move(left), std::move(right), line);
    }
    return left;
  }

  Result<ExprPtr> parse_concat() {
    const int line = cur().line;
    TG_ASSIGN(ExprPtr left, parse_math2());
    while (skip_op("~")) {
      TG_ASSIGN(ExprPtr right, parse_math2());
      left = binary("~", std::move(left), std::move(right), line);
    }
    return left;
  }

  Result<ExprPtr> parse_math2() {
    const int line = cur().line;
    TG_ASSIGN(ExprPtr left, parse_pow());
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = cur().text;
      next();
      TG_ASSIGN(ExprPtr right, parse_pow());
      left = binary(std::move(op), std::move(left), std::move(right), line);
    }
    return left;
  }

  Result<ExprPtr> parse_pow() {
    const int line = cur().line;
    TG_ASSIGN(ExprPtr left, parse_unary(true));
    while (skip_op("**")) {
      TG_ASSIGN(ExprPtr right, parse_unary(true));
      left = binary("**", std::move(left), std::move(right), line);
    }
    return left;
  }

  Result<ExprPtr> parse_unary(bool with_filter) {
    DepthGuard guard(depth_);
    TG_TRY(check_depth());
    const int line = cur().line;
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const bool neg = is_op("-");
      next();
      TG_ASSIGN(ExprPtr operand, parse_unary(false));
      node = make(neg ? ExprKind::kNeg : ExprKind::kPos, line);
      node->a = std::move(operand);
    } else {
      TG_ASSIGN(node, parse_primary());
    }
    TG_ASSIGN(node, parse_postfix(std::move(node)));
    if (with_filter) {
      TG_ASSIGN(node, parse_filter_expr(std::move(node)));
    }
    return node;
  }

  Result<ExprPtr> parse_primary() {
    const Token& t = cur();
    const int line = t.line;
    switch (t.type) {
      case TokenType::kName: {
        ExprPtr node;
        if (in_list(t.text, {"true", "True"})) {
          node = make(ExprKind::kLiteral, line);
          node->literal = Value::boolean(true);
        } else if (in_list(t.text, {"false", "False"})) {
          node = make(ExprKind::kLiteral, line);
          node->literal = Value::boolean(false);
        } else if (in_list(t.text, {"none", "None"})) {
          node = make(ExprKind::kLiteral, line);
          node->literal = Value::none();
        } else {
          node = make(ExprKind::kName, line);
          node->name = t.text;
        }
        next();
        return node;
      }
      case TokenType::kString: {
        std::string s;
        while (cur().type == TokenType::kString) {  // adjacent literals concatenate
          s += cur().text;
          next();
        }
        ExprPtr node = make(ExprKind::kLiteral, line);
        node->literal = Value::string(std::move(s));
        return node;
      }
      case TokenType::kInteger:
      case TokenType::kFloat: {
        ExprPtr node = make(ExprKind::kLiteral, line);
        node->literal = t.type == TokenType::kInteger ? Value::integer(t.int_value)
                                                      : Value::number(t.float_value);
        next();
        return node;
      }
      case TokenType::kOperator:
        if (t.text == "(") {
          next();
          TG_ASSIGN(ExprPtr node, parse_tuple(true, true, {}));
          TG_TRY(expect_op(")"));
          return node;
        }
        if (t.text == "[") return parse_list();
        if (t.text == "{") return parse_dict();
        break;
      default:
        break;
    }
    return fail("expected an expression");
  }

  Result<ExprPtr> parse_list() {
    ExprPtr node = make(ExprKind::kList, cur().line);
    next();
    while (!is_op("]")) {
      if (!node->items.empty()) TG_TRY(expect_op(","));
      if (is_op("]")) break;
      TG_ASSIGN(ExprPtr item, parse_expression(true));
      node->items.push_back(std::move(item));
    }
    next();
    return node;
  }

  Result<ExprPtr> parse_dict() {
    ExprPtr node = make(ExprKind::kDict, cur().line);
    next();
    while (!is_op("}")) {
      if (!node->items.empty()) TG_TRY(expect_op(","));
      if (is_op("}")) break;
      TG_ASSIGN(ExprPtr key, parse_expression(true));
      TG_TRY(expect_op(":"));
      TG_ASSIGN(ExprPtr value, parse_expression(true));
      node->items.push_back(std::move(key));
      node->items.push_back(std::move(value));
    }
    next();
    return node;
  }

  Result<ExprPtr> parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) {
        TG_ASSIGN(node, parse_subscript(std::move(node)));
      } else if (is_op("(")) {
        TG_ASSIGN(node, parse_call(std::move(node)));
      } else {
        return node;
      }
    }
  }

  Result<ExprPtr> parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        next();
        TG_ASSIGN(node, parse_filter(std::move(node)));
      } else if (is_name("is")) {
        TG_ASSIGN(node, parse_test(std::move(node)));
      } else if (is_op("(")) {
        TG_ASSIGN(node, parse_call(std::move(node)));
      } else {
        return node;
      }
    }
  }

  Result<ExprPtr> parse_subscript(ExprPtr node) {
    const int line = cur().line;
    if (skip_op(".")) {
      if (cur().type == TokenType::kName) {
        ExprPtr e = make(ExprKind::kGetAttr, line);
        e->a = std::move(node);
        e->name = cur().text;
        next();
        return e;
      }
      if (cur().type == TokenType::kInteger) {
        ExprPtr e = make(ExprKind::kGetItem, line);
        e->a = std::move(node);
        e->b = make(ExprKind::kLiteral, line);
        e->b->literal = Value::integer(cur().int_value);
        next();
        return e;
      }
      return fail("expected a name or number after '.'");
    }
    next();  // '['
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) TG_TRY(expect_op(","));
      TG_ASSIGN(ExprPtr arg, parse_subscribed());
      args.push_back(std::move(arg));
    }
    next();
    if (args.size() == 1 && args[0]->kind == ExprKind::kSlice) {
      args[0]->a = std::move(node);
      return std::move(args[0]);
    }
    ExprPtr e = make(ExprKind::kGetItem, line);
    e->a = std::move(node);
    if (args.size() == 1) {
      e->b = std::move(args[0]);
    } else {
      e->b = make(ExprKind::kTuple, line);
      e->b->items = std::move(args);
    }
    return e;
  }

  // One subscript argument: an expression or a slice start:stop:step (operands in b, c and
  // the kSlice node's `a` filled in by the caller).
  Result<ExprPtr> parse_subscribed() {
    const int line = cur().line;
    ExprPtr start;
    if (!is_op(":")) {
      TG_ASSIGN(start, parse_expression(true));
      if (!is_op(":")) return start;
    }
    next();  // ':'
    ExprPtr slice = make(ExprKind::kSlice, line);
    slice->items.resize(3);
    slice->items[0] = std::move(start);
    if (!is_op(":") && !is_op("]") && !is_op(",")) {
      TG_ASSIGN(slice->items[1], parse_expression(true));
    }
    if (skip_op(":")) {
      if (!is_op("]") && !is_op(",")) {
        TG_ASSIGN(slice->items[2], parse_expression(true));
      }
    }
    return slice;
  }

  // Arguments in parentheses: positional then keyword (name=value).
  Status parse_call_args(Expr& target) {
    TG_TRY(expect_op("("));
    while (!is_op(")")) {
      if (!target.items.empty() || !target.kwargs.empty()) TG_TRY(expect_op(","));
      if (is_op(")")) break;
      if (is_op("*") || is_op("**"))
        return make_error("line {}: *args and **kwargs in calls are not supported", cur().line);
      if (cur().type == TokenType::kName && peek().type == TokenType::kOperator &&
          peek().text == "=") {
        std::string key = cur().text;
        next();
        next();
        TG_ASSIGN(ExprPtr value, parse_expression(true));
        target.kwargs.emplace_back(std::move(key), std::move(value));
      } else {
        if (!target.kwargs.empty())
          return make_error("line {}: positional argument after keyword argument", cur().line);
        TG_ASSIGN(ExprPtr value, parse_expression(true));
        target.items.push_back(std::move(value));
      }
    }
    next();
    return {};
  }

  Result<ExprPtr> parse_call(ExprPtr callee) {
    ExprPtr e = make(ExprKind::kCall, cur().line);
    e->a = std::move(callee);
    TG_TRY(parse_call_args(*e));
    return e;
  }

  Result<std::string> parse_dotted_name() {
    TG_ASSIGN(std::string name, expect_name());
    while (skip_op(".")) {
      TG_ASSIGN(std::string part, expect_name());
      name += "." + part;
    }
    return name;
  }

  // After '|': name [ (args) ].
  Result<ExprPtr> parse_filter(ExprPtr input) {
    ExprPtr e = make(ExprKind::kFilter, cur().line);
    e->a = std::move(input);
    TG_ASSIGN(e->name, parse_dotted_name());
    if (is_op("(")) TG_TRY(parse_call_args(*e));
    return e;
  }

  // Filters of {% filter a|b %} (start_inline) or {% set x | a %} (each preceded by '|').
  Result<std::vector<ExprPtr>> parse_filter_chain(bool start_inline) {
    std::vector<ExprPtr> filters;
    while (start_inline || is_op("|")) {
      if (!start_inline) next();
      start_inline = false;
      TG_ASSIGN(ExprPtr f, parse_filter(nullptr));
      filters.push_back(std::move(f));
    }
    return filters;
  }

  Result<ExprPtr> parse_test(ExprPtr input) {
    ExprPtr e = make(ExprKind::kTest, cur().line);
    next();  // 'is'
    e->a = std::move(input);
    if (skip_name("not")) e->negated = true;
    TG_ASSIGN(e->name, parse_dotted_name());
    if (is_op("(")) {
      TG_TRY(parse_call_args(*e));
    } else {
      const Token& t = cur();
      const bool starts_arg = t.type == TokenType::kName || t.type == TokenType::kString ||
                              t.type == TokenType::kInteger || t.type == TokenType::kFloat ||
                              (t.type == TokenType::kOperator && (t.text == "[" || t.text == "{"));
      if (starts_arg && !is_name("else") && !is_name("or") && !is_name("and")) {
        if (is_name("is")) return make_error("line {}: tests cannot be chained with 'is'", t.line);
        TG_ASSIGN(ExprPtr arg, parse_primary());
        TG_ASSIGN(arg, parse_postfix(std::move(arg)));
        e->items.push_back(std::move(arg));
      }
    }
    return e;
  }

  const std::vector<Token>& toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Result<Body> parse_template(const std::vector<Token>& tokens) {
  if (tokens.empty() || tokens.back().type != TokenType::kEnd)
    return make_error("internal: token stream without end marker");
  Parser parser(tokens);
  return parser.parse_all();
}

}  // namespace tangram::jinja
