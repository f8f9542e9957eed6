// Unit tests of the Jinja interpreter: expressions, filters, tests, methods, whitespace control,
// loops, macros and errors. Each case's expected text was produced by Python jinja2 with Hugging
// Face's settings, and TableAgreesWithPython re-checks the whole table against it at test time.
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "chat/jinja_lexer.h"
#include "chat/reference_renderer.h"
#include "support/test_support.h"

namespace tangram {
namespace {

struct Case {
  const char* name;
  const char* source;
  bool ok;               // Python renders it
  const char* expected;  // the text, or (when !ok) a substring our error message must contain
};

// Variables every case sees.
const char* kContext = R"({"d": {"a": 1, "b": "two", "items": "field"},
  "users": [{"name": "ann", "active": true}, {"name": "bob", "active": false}, {"name": "cy", "active": true}],
  "data": {"name": "café", "n": [1, 2.5, null, true], "nested": {"k": "v \"q\""}}})";

const Case kCases[] = {
    {"arith",
     "{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 4 / 2 "
     "}}",
     true, "7 3 -4 2 3.5 1024 2.0"},
    {"floats",
     "{{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.0 }} {{ 1e-5 }} {{ 0.0001 }} {{ 123456789012345678.0 }} {{ "
     "1_000 }} {{ 2.50 }}",
     true, "0.30000000000000004 1e+20 1.0 1e-05 0.0001 1.2345678901234568e+17 1000 2.5"},
    {"concat", "{{ 'a' ~ 1 ~ none ~ true }} {{ 'x' + 'y' }} {{ [1] + [2] }} {{ 'ab' * 3 }}", true,
     "a1NoneTrue xy [1, 2] ababab"},
    {"compare",
     "{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ 2 >= 2 }} {{ [1, 2] < [1, "
     "3] }}",
     true, "True False True True True True"},
    {"membership", "{{ 'a' in 'abc' }} {{ 2 not in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' in d }}",
     true, "True False True False"},
    {"logic", "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ none or [] }} {{ not 0 }} {{ not 'a' and 1 }}",
     true, "x y [] True False"},
    {"condexpr",
     "{{ 'yes' if true else 'no' }}|{{ 'z' if false }}|{{ 'a' if 0 else 'b' if 1 else 'c' }}", true,
     "yes||b"},
    {"tests",
     "{{ x is defined }} {{ x is undefined }} {{ none is none }} {{ 'a' is string }} {{ {} is "
     "mapping }} {{ [] is iterable }} {{ 1 is number }} {{ 'ab' is sequence }} {{ 3 is odd }} {{ 4 "
     "is divisibleby 2 }} {{ true is boolean }} {{ 1.5 is float }} {{ 1 is integer }} {{ false is "
     "false }} {{ d is not none }}",
     true, "False True True True True True True True True True True True True True True"},
    {"test_args",
     "{{ 2 is equalto 2 }} {{ 2 is eq(3) }} {{ 'a' is in('abc') }} {{ none is sameas none }} {{ 5 "
     "is gt 3 }}",
     true, "True False True True True"},
    {"subscripts",
     "{{ 'hello'[1:3] }} {{ [1, 2, 3, 4][::-1] }} {{ [1, 2, 3][-1] }} {{ 'héllo'[::-1] }} {{ "
     "'abcdef'[1::2] }} {{ [1, 2, 3][5] is defined }} {{ 'héllo'[1] }} {{ [1, 2, 3][:-1] }}",
     true, "el [4, 3, 2, 1] 3 olléh bdf False é [1, 2]"},
    {"attributes",
     "{{ d.a }} {{ d['b'] }} {{ d.items is defined }} {{ d['items'] }} {{ d.missing is defined }} "
     "{{ users[0].name }} {{ users.0.name }}",
     true, "1 two True field False ann ann"},
    {"literals",
     "{{ [1, 'a', none, true, 1.5] }} {{ {'a': 1, 'b': [2]} }} {{ (1,) }} {{ (1, 2) }} {{ \"it's\" "
     "}} {{ 'say \"hi\"' }} {{ 'tab\\there' }}",
     true, "[1, 'a', None, True, 1.5] {'a': 1, 'b': [2]} (1,) (1, 2) it's say \"hi\" tab\there"},
    {"string_escapes",
     "{{ 'a\\nb' }}|{{ \"q\\\"q\" }}|{{ 'u\\u00e9\\x41' }}|{{ 'back\\\\slash' }}|{{ 'keep\\d' "
     "}}|{{ 'adj' \"acent\" }}",
     true, "a\nb|q\"q|uéA|back\\slash|keep\\d|adjacent"},
    {"filters_text",
     "{{ '  x  ' | trim }}|{{ 'xxaxx' | trim('x') }}|{{ 'aXb' | lower }}|{{ 'aXb' | upper }}|{{ "
     "'hello wORLD-foo' | title }}|{{ 'hELLO' | capitalize }}|{{ 'a b' | replace(' ', '_') }}|{{ "
     "'aaa' | replace('a', 'b', 2) }}",
     true, "x|a|axb|AXB|Hello World-Foo|Hello|a_b|bba"},
    {"filters_seq",
     "{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ "
     "[1, 2, 3] | join(', ') }} {{ [1, 2] | length }} {{ 'héllo' | length }} {{ [1, 2, 3] | first "
     "}} {{ [1, 2, 3] | last }} {{ 'abc' | list }} {{ [1, 2, 3] | reverse | list }} {{ 'abc' | "
     "reverse }}",
     true, "[1, 2, 3] ['A', 'b', 'c'] [3, 2, 1] 1, 2, 3 2 5 1 3 ['a', 'b', 'c'] [3, 2, 1] cba"},
    {"filters_default",
     "{{ x | default('d') }} {{ '' | default('d', true) }} {{ none | default('n') }} {{ 0 | "
     "d('zero', boolean=true) }}",
     true, "d d None zero"},
    {"filters_dict",
     "{{ {'b': 1, 'a': 2} | dictsort }} {{ {'a': 1, 'b': 2} | items | list }} {{ {'b': 1, 'a': 2} "
     "| dictsort(by='value', reverse=true) }}",
     true, "[('a', 2), ('b', 1)] [('a', 1), ('b', 2)] [('a', 2), ('b', 1)]"},
    {"filters_select",
     "{{ users | selectattr('active') | map(attribute='name') | join(',') }} {{ users | "
     "rejectattr('active') | map(attribute='name') | list }} {{ users | selectattr('name', "
     "'equalto', 'cy') | list | length }} {{ [1, 2, 3] | select('odd') | list }} {{ [1, 2, 3] | "
     "reject('equalto', 2) | list }} {{ ['a', 'b'] | map('upper') | join }} {{ none | "
     "selectattr('x') | list }}",
     true, "ann,cy ['bob'] 1 [1, 3] [1, 3] AB []"},
    {"filters_numbers",
     "{{ '42' | int + 1 }} {{ '3.9' | int }} {{ 'x' | int(7) }} {{ '3.5' | float }} {{ [1, 2, 3] | "
     "sum }} {{ [1, 5, 3] | max }} {{ [4, 2] | min }} {{ -3 | abs }} {{ 2.5 | round }} {{ 2.567 | "
     "round(2) }} {{ 3 | string }} {{ [1, 'a'] | string }}",
     true, "43 3 7 3.5 6 5 2 3 2.0 2.57 3 [1, 'a']"},
    {"filters_unique",
     "{{ [1, 2, 2, 3, 1] | unique | list }} {{ ['a', 'A', 'b'] | unique | list }}", true,
     "[1, 2, 3] ['a', 'b']"},
    {"filters_indent",
     "[{{ 'x\\ny\\n\\nz' | indent(2) }}]|[{{ 'x\\ny' | indent(2, true) }}]|[{{ 'x\\n\\ny' | "
     "indent('--', blank=true) }}]",
     true, "[x\n  y\n\n  z]|[  x\n  y]|[x\n--\n--y]"},
    {"tojson",
     "{{ data | tojson }}|{{ data | tojson(indent=2) }}|{{ 'é\"\\n' | tojson }}|{{ [] | "
     "tojson(indent=4) }}|{{ data.n | tojson(separators=(',', ':')) }}|{{ {'b': 1, 'a': 2} | "
     "tojson(sort_keys=true) }}|{{ 'é' | tojson(ensure_ascii=true) }}",
     true,
     "{\"name\": \"café\", \"n\": [1, 2.5, null, true], \"nested\": {\"k\": \"v \\\"q\\\"\"}}|{\n  "
     "\"name\": \"café\",\n  \"n\": [\n    1,\n    2.5,\n    null,\n    true\n  ],\n  \"nested\": "
     "{\n    \"k\": \"v \\\"q\\\"\"\n  }\n}|\"é\\\"\\n\"|[]|[1,2.5,null,true]|{\"a\": 2, \"b\": "
     "1}|\"\\u00e9\""},
    {"methods_str",
     "{{ ' a '.strip() }}|{{ 'a,b'.split(',') }}|{{ ' a b  c '.split() }}|{{ "
     "'xabc'.startswith('xa') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ 'aaa'.replace('a', 'b', 2) "
     "}}|{{ 'AbC'.upper() }}{{ 'AbC'.lower() }}|{{ "
     "'x</think>\\ny'.split('</think>')[-1].lstrip('\\n') }}|{{ '\\n\\nx\\n'.rstrip('\\n') }}|{{ "
     "'hello world'.title() }}|{{ 'a-b-c'.rsplit('-', 1) }}|{{ '-'.join(['a', 'b']) }}|{{ "
     "'abcb'.find('b') }}",
     true,
     "a|['a', 'b']|['a', 'b', 'c']|True|True|bba|ABCabc|y|\n\nx|Hello World|['a-b', 'c']|a-b|1"},
    {"methods_dict",
     "{{ d.get('a') }} {{ d.get('zz', 'def') }} {{ d.get('zz') }} {{ d.keys() | list }} {{ "
     "d.values() | list | length }}{% for k, v in d.items() %} {{ k }}={{ v }}{% endfor %}",
     true, "1 def None ['a', 'b', 'items'] 3 a=1 b=two items=field"},
    {"trim_blocks", "{% if true %}\nA\n{% endif %}\nB", true, "A\nB"},
    {"lstrip_blocks", "  {% if true %}X{% endif %}\n    {% if true %}\nY\n    {% endif %}\nZ", true,
     "XY\nZ"},
    {"dash_control", "a  {{- 'b' -}}  c\n  {%- if true -%}  D  {%- endif %}   E", true, "abcD   E"},
    {"plus_control", "  {%+ if true %}X{% endif %}", true, "  X"},
    {"comments", "a {# c #} b\n  {# line comment #}\nc {#- strip -#}   d", true, "a  b\ncd"},
    {"trailing_newline", "x\n", true, "x"},
    {"raw", "{% raw %}{{ x }}{% if %}{% endraw %}|{%- raw -%}  keep {{ y }}  {%- endraw %}", true,
     "{{ x }}{% if %}|keep {{ y }}"},
    {"variable_no_lstrip", "  {{ 'x' }}\n  {{- 'y' }}", true, "  xy"},
    {"loop_vars",
     "{% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last "
     "}}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}|{% endfor %}",
     true, "10TrueFalse332|21FalseFalse321|32FalseTrue310|"},
    {"loop_else",
     "{% for x in [] %}a{% else %}empty{% endfor %}{% for x in missing %}b{% else %}!{% endfor %}",
     true, "empty!"},
    {"loop_filter", "{% for x in range(7) if x is even %}{{ x }}{{ loop.length }},{% endfor %}",
     true, "04,24,44,64,"},
    {"loop_unpack",
     "{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}{% for a, b in [[1, "
     "2], [3, 4]] %}{{ a + b }}{% endfor %}",
     true, "a=1;b=2;37"},
    {"loop_control",
     "{% for x in range(10) %}{% if x == 4 %}{% break %}{% endif %}{% if x == 1 %}{% continue %}{% "
     "endif %}{{ x }}{% endfor %}",
     true, "023"},
    {"loop_scoping",
     "{% set y = 1 %}{% for x in [1, 2] %}{{ y }}{% set y = y + 10 %}{{ y }};{% endfor %}{{ y }}",
     true, "111;111;1"},
    {"loop_nested",
     "{% for a in [1, 2] %}{% for b in ['x', 'y'] %}{{ a }}{{ b }}{{ loop.index }} {% endfor %}{{ "
     "loop.index }}|{% endfor %}",
     true, "1x1 1y2 1|2x1 2y2 2|"},
    {"loop_cycle",
     "{% for x in range(4) %}{{ loop.cycle('a', 'b') }}{{ loop.previtem is defined }}{% endfor %}",
     true, "aFalsebTrueaTruebTrue"},
    {"namespace",
     "{% set ns = namespace(c=0, found=false) %}{% for x in [1, 2, 3] %}{% set ns.c = ns.c + x "
     "%}{% if x == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.c }} {{ ns.found }}",
     true, "6 True"},
    {"if_scoping",
     "{% if true %}{% set z = 5 %}{% endif %}{{ z }}{% if false %}{% elif 1 %}E{% else %}F{% endif "
     "%}",
     true, "5E"},
    {"macro",
     "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Bob') }} "
     "{{ greet('Al', punct='?') }} {{ greet() }}",
     true, "Hi Bob! Hi Al? Hi !"},
    {"macro_caller",
     "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') "
     "%}inner{% endcall %}",
     true, "<b>inner</b>"},
    {"macro_caller_args",
     "{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% "
     "call(x) each([1, 2]) %}<{{ x }}>{% endcall %}",
     true, "<1><2>"},
    {"macro_recursion",
     "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% "
     "endmacro %}{{ fact(5) }}",
     true, "120"},
    {"macro_closure",
     "{% set greeting = 'Hey' %}{% macro m(x) %}{{ greeting }} {{ x }}{% endmacro %}{{ m('you') }}",
     true, "Hey you"},
    {"set_block",
     "{% set x %}a{{ 1 }}b{% endset %}{{ x }}|{% set y | upper %}ab{% endset %}{{ y }}|{% set a, b "
     "= 1, 2 %}{{ a }}{{ b }}",
     true, "a1b|AB|12"},
    {"filter_block",
     "{% filter upper %}abc{{ 'd' }}{% endfilter %}{% filter trim | lower %}  XY  {% endfilter %}",
     true, "ABCDxy"},
    {"with_block", "{% with a = 5, b = 6 %}{{ a + b }}{% endwith %}{{ a is defined }}", true,
     "11False"},
    {"markup",
     "{{ 'a<'|safe + '<b>' }}|{{ '<x>' + 'y'|safe }}|{{ '<&>' | e }}|{{ ('<'|safe).strip() + '>' "
     "}}|{{ '<' ~ ('>'|safe) }}",
     true, "a<&lt;b&gt;|&lt;x&gt;y|&lt;&amp;&gt;|<&gt;|<>"},
    {"undefined",
     "[{{ missing }}]{{ missing | length }}{% for x in missing %}{% endfor %}{{ missing is "
     "iterable }}{{ missing | list }}{{ missing ~ 'ok' }}",
     true, "[]0True[]ok"},
    {"range_dict",
     "{{ range(3) | list }} {{ range(1, 10, 3) | list }} {{ dict(a=1, b=2) }} {{ namespace(a=1).a "
     "}}",
     true, "[0, 1, 2] [1, 4, 7] {'a': 1, 'b': 2} 1"},
    {"int_keys",
     "{% set m = {0: 'zero', 2: 'two'} %}{{ m[2] }} {{ m[0] }} {{ m | dictsort }} {{ m | tojson }}",
     true, "two zero [(0, 'zero'), (2, 'two')] {\"0\": \"zero\", \"2\": \"two\"}"},
    {"generators",
     "{{ [1, 2] | map('string') | list }} {{ ([] | select) is iterable }} {{ [1] | select | first "
     "}}",
     true, "['1', '2'] True 1"},
    {"strftime", "{{ strftime_now('%Y-%m-%d %H:%M %b %B %a') }}", true,
     "2024-07-26 12:00 Jul July Fri"},
    {"percent_format",
     "{{ '%s-%d' % ('a', 3) }}|{{ '%5.2f|%-4s|%04d|%x|%r|%%' % (3.14159, 'ab', 7, 255, 'q') }}|{{ "
     "'%(n)s!' % {'n': 'é'} }}|{{ '%.3s|%5s|%e' % ('abcdef', 'é', 12345.678) }}",
     true, "a-3| 3.14|ab  |0007|ff|'q'|%|é!|abc|    é|1.234568e+04"},
    {"batch", "{{ [1, 2, 3] | batch(2) | list }} {{ [1, 2, 3] | batch(2, 0) | list }}", true,
     "[[1, 2], [3]] [[1, 2], [3, 0]]"},
    {"markup_methods", "{{ ('a<b'|safe).split('<') }} {{ ('x'|safe).replace('x', '<') }}", true,
     "[Markup('a'), Markup('b')] &lt;"},
    {"err_percent_args", "{{ 'x' % 5 }}", false,
     "not all arguments converted during string formatting"},
    {"err_slice_int", "{% set n = 5 %}{{ n[1:] }}", false, "'int' object is not subscriptable"},
    {"err_undefined_attr", "{{ missing.attr }}", false, "line 1: 'missing' is undefined"},
    {"err_undefined_add", "{{ 'a' + missing }}", false, "line 1: 'missing' is undefined"},
    {"err_raise", "\n\n{{ raise_exception('boom') }}", false, "line 3: raise_exception: boom"},
    {"err_not_iterable", "{% for x in 5 %}{% endfor %}", false,
     "line 1: 'int' object is not iterable"},
    {"err_unknown_filter", "{{ 1 | frobnicate }}", false, "line 1: no filter named 'frobnicate'"},
    {"err_unsafe_append", "{% set l = [1] %}{{ l.append(2) }}", false,
     "line 1: access to attribute 'append' of 'list' object is unsafe"},
    {"err_type_add", "{{ 'a' + 1 }}", false,
     "line 1: unsupported operand type(s) for +: 'str' and 'int'"},
    {"err_len_none", "{{ none | length }}", false, "object of type 'NoneType' has no len()"},
    {"err_tojson_undefined", "{{ missing | tojson }}", false,
     "Object of type Undefined is not JSON serializable"},
    {"err_generator_len", "{{ [1, 2] | map('string') | length }}", false,
     "object of type 'generator' has no len()"},
    {"err_macro_args", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", false,
     "macro 'm' takes not more than 1 argument(s)"},
    {"err_compare", "{{ 1 < 'a' }}", false,
     "'<' not supported between instances of 'int' and 'str'"},
    {"err_range", "{{ range(1000000) | length }}", false, "Range too big"},
};

RenderOptions fixed_clock() {
  RenderOptions options;
  options.now_unix_seconds = testing::kReferenceNowUnix;
  return options;
}

Result<std::string> render(const std::string& source, const nlohmann::ordered_json& context,
                           const RenderOptions& options = fixed_clock()) {
  TG_ASSIGN(ChatTemplate tmpl, ChatTemplate::parse(source));
  return tmpl.render_context(context, options);
}

TEST(JinjaInterpreter, Cases) {
  const auto context = nlohmann::ordered_json::parse(kContext);
  for (const Case& c : kCases) {
    auto got = render(c.source, context);
    if (c.ok) {
      ASSERT_TRUE(got.ok()) << c.name << ": " << got.message();
      EXPECT_EQ(got.value(), c.expected) << c.name;
    } else {
      ASSERT_FALSE(got.ok()) << c.name << " rendered: " << got.value();
      EXPECT_NE(got.message().find(c.expected), std::string::npos)
          << c.name << ": " << got.message();
    }
  }
}

TEST(JinjaInterpreter, TableAgreesWithPython) {
  const auto context = nlohmann::ordered_json::parse(kContext);
  std::vector<testing::ReferenceCase> cases;
  for (const Case& c : kCases) cases.push_back({c.source, context});
  const auto want = testing::render_with_python(cases);
  ASSERT_EQ(want.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(want[i].ok, kCases[i].ok) << kCases[i].name << ": " << want[i].error;
    if (want[i].ok && kCases[i].ok) {
      EXPECT_EQ(want[i].text, kCases[i].expected) << kCases[i].name;
    }
  }
}

// Errors name the construct and the line.
TEST(JinjaInterpreter, ParseErrorsNameConstructAndLine) {
  struct Bad {
    const char* source;
    const char* message;
  };
  const Bad bad[] = {
      {"ok\n{% include 'other.jinja' %}", "line 2: the '{% include %}' tag is not supported"},
      {"{% extends 'base' %}", "line 1: the '{% extends %}' tag is not supported"},
      {"a\nb\n{{ 1 + }}", "line 3: expected an expression"},
      {"{{ x", "line 1: unexpected end of template"},
      {"{% if x %}\nyes",
       "line 2: unexpected end of template, expected 'elif' or 'else' or 'endif'"},
      {"{% endif %}", "line 1: unexpected '{% endif %}'"},
      {"{% frobnicate %}", "line 1: unknown tag 'frobnicate'"},
      {"\n{% break %}", "line 2: 'break' outside a for loop"},
      {"{{ 'abc }}", "line 1: unterminated string literal"},
      {"{# never closed", "line 1: unterminated comment"},
      {"{{ (1 ] }}", "line 1: unexpected ']'"},
      {"{% for x in y recursive %}{% endfor %}", "recursive for loops are not supported"},
      {"{{ f(*args) }}", "*args and **kwargs in calls are not supported"},
      {"{% set 1 = 2 %}", "expected a variable name"},
      {"{{ 99999999999999999999 }}", "integer literal too large"},
      {"{{ '\\N{DASH}' }}", "\\N{...} escapes are not supported"},
  };
  for (const Bad& b : bad) {
    auto r = ChatTemplate::parse(b.source);
    ASSERT_FALSE(r.ok()) << b.source;
    EXPECT_NE(r.message().find(b.message), std::string::npos) << b.source << " -> " << r.message();
    EXPECT_EQ(r.message().rfind("chat template: ", 0), 0u) << r.message();
  }
}

TEST(JinjaInterpreter, DeepNestingIsAnErrorNotACrash) {
  const std::string parens = std::string(5000, '(') + "1" + std::string(5000, ')');
  auto r = ChatTemplate::parse("{{ " + parens + " }}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("nested too deeply"), std::string::npos) << r.message();

  std::string ifs;
  for (int i = 0; i < 3000; ++i) ifs += "{% if true %}";
  for (int i = 0; i < 3000; ++i) ifs += "{% endif %}";
  r = ChatTemplate::parse(ifs);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("nested too deeply"), std::string::npos) << r.message();

  std::string nots = "{{ ";
  for (int i = 0; i < 5000; ++i) nots += "not ";
  r = ChatTemplate::parse(nots + "x }}");
  EXPECT_FALSE(r.ok());
  r = ChatTemplate::parse("{{ " + std::string(5000, '-') + "1 }}");
  EXPECT_FALSE(r.ok());
  r = ChatTemplate::parse("{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}");
  EXPECT_FALSE(r.ok());

  // Moderate nesting stays fine.
  r = ChatTemplate::parse("{{ " + std::string(20, '(') + "1" + std::string(20, ')') + " }}");
  EXPECT_TRUE(r.ok()) << r.message();
}

TEST(JinjaInterpreter, RuntimeGuards) {
  const nlohmann::ordered_json empty = nlohmann::ordered_json::object();
  // Unbounded macro recursion.
  auto r = render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", empty);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("nested deeper than"), std::string::npos) << r.message();

  // Work budget: nested loops stop at max_steps.
  RenderOptions small = fixed_clock();
  small.max_steps = 10000;
  r = render("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", empty,
             small);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("work limit"), std::string::npos) << r.message();

  // Output size.
  RenderOptions tiny = fixed_clock();
  tiny.max_output_bytes = 1000;
  r = render("{% for i in range(100) %}0123456789ab{% endfor %}", empty, tiny);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("rendered output exceeds"), std::string::npos) << r.message();
  r = render("{{ 'a' * 100000000000 }}", empty);
  EXPECT_FALSE(r.ok());
  // Repeating a list copies its strings (found by fuzz/fuzz_jinja).
  r = render("{{ (['a' * 60000000] * 1000) | length }}", empty);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("list repetition exceeds"), std::string::npos) << r.message();
  r = render("{{ (['ab', [1, 2]] * 3) | length }}", empty);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(*r, "6");
  // replace() builds one string from few steps: 1e5 replacements of 1e5 bytes would be 10 GB
  // (found by fuzz/fuzz_jinja).
  for (const char* t : {"{{ ('a' * 100000).replace('a', 'b' * 100000) }}",
                        "{{ ('a' * 100000) | replace('a', 'b' * 100000) }}",
                        "{{ ('a' * 100000).replace('', 'b' * 100000) }}"}) {
    r = render(t, empty);
    ASSERT_FALSE(r.ok()) << t;
    EXPECT_NE(r.message().find("replace() result exceeds"), std::string::npos) << r.message();
  }

  // Values can't nest without bound through namespace assignment, nor hold namespaces.
  r = render(
      "{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}",
      empty);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("nested deeper than"), std::string::npos) << r.message();
  r = render("{% set ns = namespace() %}{% set ns.self = ns %}", empty);
  EXPECT_FALSE(r.ok());
  r = render("{% set x = 1 %}{% set x.attr = 2 %}", empty);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("not a namespace()"), std::string::npos) << r.message();

  // Deep JSON input is refused, not recursed into without bound.
  std::string deep;
  for (int i = 0; i < 1000; ++i) deep += "[";
  for (int i = 0; i < 1000; ++i) deep += "]";
  auto tmpl = ChatTemplate::parse("{{ x }}");
  ASSERT_TRUE(tmpl.ok());
  r = tmpl->render_context({{"x", nlohmann::ordered_json::parse(deep)}});
  EXPECT_FALSE(r.ok());
}

// Jinja2 with trim_blocks/lstrip_blocks off behaves as plain Jinja (the lexer's options).
TEST(JinjaLexer, OptionsOff) {
  jinja::LexerOptions plain;
  plain.trim_blocks = false;
  plain.lstrip_blocks = false;
  plain.keep_trailing_newline = true;
  auto tokens = jinja::tokenize("  {% if x %}\nA\n", plain);
  ASSERT_TRUE(tokens.ok()) << tokens.message();
  ASSERT_GE(tokens->size(), 3u);
  EXPECT_EQ((*tokens)[0].type, jinja::TokenType::kData);
  EXPECT_EQ((*tokens)[0].text, "  ");
  EXPECT_EQ(tokens->back().type, jinja::TokenType::kEnd);
  EXPECT_EQ((*tokens)[tokens->size() - 2].text, "\nA\n");

  auto hf = jinja::tokenize("  {% if x %}\nA\n", jinja::LexerOptions{});
  ASSERT_TRUE(hf.ok());
  EXPECT_EQ((*hf)[0].type, jinja::TokenType::kBlockBegin);
  EXPECT_EQ((*hf)[hf->size() - 2].text, "A");
  EXPECT_EQ((*hf)[1].line, 1);
  EXPECT_EQ((*hf)[hf->size() - 2].line, 2);
}

// Cutting real templates at arbitrary points never crashes: parse and render give a value or
// an Error.
TEST(JinjaInterpreter, TruncatedRealTemplatesFailCleanly) {
  const char* names[] = {"Qwen-Qwen3-0.6B", "meta-llama-Llama-3.1-8B-Instruct",
                         "openai-gpt-oss-120b", "unsloth-mistral-Devstral-Small-2507",
                         "ibm-granite-granite-3.3-2B-Instruct"};
  const auto context = nlohmann::ordered_json::parse(
      R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
          "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})");
  int parsed = 0;
  for (const char* name : names) {
    const std::string source = testing::read_file(
        testing::data_file(std::string("models/chat-templates/") + name + ".jinja"));
    for (size_t cut = 0; cut < source.size(); cut += 37) {
      auto tmpl = ChatTemplate::parse(source.substr(0, cut));
      if (!tmpl.ok()) {
        EXPECT_NE(tmpl.message().find("line "), std::string::npos) << tmpl.message();
        continue;
      }
      ++parsed;
      auto r = tmpl->render_context(context, fixed_clock());
      if (!r.ok()) {
        EXPECT_FALSE(r.message().empty());
      }
    }
  }
  EXPECT_GT(parsed, 0);
}

}  // namespace
}  // namespace tangram
