#include "grammar/output_matcher.h"

#include <random>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "grammar/schema_reference.h"

namespace tangram {
namespace {

using nlohmann::json;

std::shared_ptr<const OutputGrammar> grammar_of(const json& schema) {
  Result<JsonSchemaGraph> g = compile_json_schema(schema);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.message());
  return std::make_shared<const OutputGrammar>(OutputGrammar::json_value(std::move(*g)));
}

// Whether the matcher takes the whole text and may end after it.
bool matches(const std::shared_ptr<const OutputGrammar>& g, std::string_view text) {
  OutputMatcher m(g);
  return m.feed(text) && m.may_end();
}

// Whether the text is a prefix the matcher accepts (not necessarily complete).
bool accepts_prefix(const std::shared_ptr<const OutputGrammar>& g, std::string_view text) {
  OutputMatcher m(g);
  return m.feed(text);
}

TEST(OutputMatcher, ObjectWithRequiredAndOptionalProperties) {
  const json schema =
      json::parse(R"({"type": "object", "additionalProperties": false, "required": ["name", "age"],
      "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}}})");
  auto g = grammar_of(schema);
  EXPECT_TRUE(matches(g, R"({"name":"Ann","age":31})"));
  EXPECT_TRUE(matches(g, R"({"age":-7,"name":"B\u00e9\n","tags":["a","b"]})"));
  // Compact, as clients see JSON elsewhere: no blank between tokens (only inside strings).
  EXPECT_FALSE(accepts_prefix(g, "{ "));
  EXPECT_FALSE(accepts_prefix(g, R"({"name": )"));
  EXPECT_FALSE(accepts_prefix(g, "{\n\"name\""));
  EXPECT_TRUE(matches(g, R"({"name":"a b\t","age":0})"));
  EXPECT_FALSE(matches(g, R"({"name":"Ann"})"));             // age missing: may not end
  EXPECT_FALSE(accepts_prefix(g, R"({"name":"Ann"})"));      // ... nor close
  EXPECT_FALSE(accepts_prefix(g, R"({"nam":)"));             // not a property
  EXPECT_FALSE(accepts_prefix(g, R"({"name":"a","name")"));  // each key once
  EXPECT_FALSE(accepts_prefix(g, R"({"age":1.5)"));          // integer
  EXPECT_FALSE(accepts_prefix(g, R"({"age":01)"));           // no leading zeros
  EXPECT_FALSE(accepts_prefix(g, R"({"name":"a"b)"));
  EXPECT_FALSE(accepts_prefix(g, "{\"name\":\"a\tb"));          // raw control character
  EXPECT_FALSE(accepts_prefix(g, R"({"name":"\q)"));            // bad escape
  EXPECT_FALSE(accepts_prefix(g, R"({"name":"\ud800)"));        // lone surrogate
  EXPECT_FALSE(accepts_prefix(g, "{\"name\":\"\xC0\xAF"));      // overlong UTF-8
  EXPECT_FALSE(accepts_prefix(g, R"({"name":"a","age":1} )"));  // nothing after the value
  EXPECT_TRUE(accepts_prefix(g, R"({"tags":[)"));
  EXPECT_FALSE(accepts_prefix(g, R"({"tags":[1)"));
}

TEST(OutputMatcher, MustEndOnlyAfterTheValue) {
  auto g = grammar_of(json::parse(
      R"({"type": "object", "properties": {"a": {"type": "boolean"}}, "additionalProperties": false})"));
  OutputMatcher m(g);
  EXPECT_FALSE(m.may_end());
  ASSERT_TRUE(m.feed(R"({"a":tru)"));
  EXPECT_FALSE(m.may_end());
  ASSERT_TRUE(m.feed("e}"));
  EXPECT_TRUE(m.may_end());
  EXPECT_TRUE(m.must_end());
  EXPECT_FALSE(m.feed(" "));
}

TEST(OutputMatcher, NumbersEndWhereTheyMay) {
  auto number = grammar_of(json::parse(R"({"type": "number"})"));
  for (const char* ok : {"0", "-0", "12", "3.25", "1e5", "-2.5E+10", "7e-3"})
    EXPECT_TRUE(matches(number, ok)) << ok;
  for (const char* bad : {"-", "1.", "01", "1e", ".5", "+1", "1.5.2", "NaN"})
    EXPECT_FALSE(matches(number, bad)) << bad;
  OutputMatcher m(number);
  ASSERT_TRUE(m.feed("12"));
  EXPECT_TRUE(m.may_end());
  EXPECT_FALSE(m.must_end());  // more digits may follow
  auto digits = grammar_of(json::parse(R"({"type": "integer"})"));
  EXPECT_TRUE(matches(digits, std::string(16, '9')));
  EXPECT_FALSE(accepts_prefix(digits, std::string(17, '9')));
}

TEST(OutputMatcher, EnumsConstAndAnyOf) {
  auto colours = grammar_of(json::parse(R"({"enum": ["red", "green", 1, 12, null, {"a": [1]}]})"));
  for (const char* ok : {R"("red")", R"("green")", "1", "12", "null", R"({"a":[1]})"})
    EXPECT_TRUE(matches(colours, ok)) << ok;
  for (const char* bad : {R"("re")", R"("blue")", "2", "123", R"({"a": [1]})"})
    EXPECT_FALSE(matches(colours, bad)) << bad;
  auto either = grammar_of(json::parse(R"({"anyOf": [
      {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}, "required": ["kind", "r"], "additionalProperties": false},
      {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "integer"}}, "required": ["kind", "side"], "additionalProperties": false},
      {"type": "null"}]})"));
  EXPECT_TRUE(matches(either, R"({"kind":"circle","r":1.5})"));
  EXPECT_TRUE(matches(either, R"({"side":2,"kind":"square"})"));
  EXPECT_TRUE(matches(either, "null"));
  EXPECT_FALSE(accepts_prefix(either, R"({"kind":"circle","side")"));
  EXPECT_FALSE(accepts_prefix(either, R"({"side":2,"kind":"circle")"));
}

TEST(OutputMatcher, AnyValueAndAdditionalProperties) {
  auto any_object =
      std::make_shared<const OutputGrammar>(OutputGrammar::json_value(any_json_object()));
  EXPECT_TRUE(matches(any_object, R"({"a":[1,{"b":null}],"c":"d","e":true})"));
  EXPECT_TRUE(matches(any_object, "{}"));
  EXPECT_FALSE(matches(any_object, "[1]"));
  EXPECT_TRUE(
      accepts_prefix(any_object, R"({"a":1,"a")"));  // undeclared keys are not checked for repeats
  EXPECT_FALSE(accepts_prefix(any_object, R"({"a\n)"));  // escapes in free keys: no second spelling
  auto typed_extra =
      grammar_of(json::parse(R"({"type": "object", "properties": {"id": {"type": "integer"}},
      "additionalProperties": {"type": "string"}})"));
  EXPECT_TRUE(matches(typed_extra, R"({"x":"y","id":3,"idx":"z"})"));
  EXPECT_FALSE(accepts_prefix(typed_extra, R"({"x":3)"));
  EXPECT_FALSE(accepts_prefix(typed_extra, R"({"id":"3")"));
}

TEST(OutputMatcher, ArrayBoundsAndWhitespace) {
  auto pair = grammar_of(json::parse(
      R"({"type": "array", "items": {"type": "boolean"}, "minItems": 2, "maxItems": 2})"));
  EXPECT_TRUE(matches(pair, "[true,false]"));
  EXPECT_FALSE(accepts_prefix(pair, "[true, "));
  EXPECT_FALSE(accepts_prefix(pair, "[true]"));
  EXPECT_FALSE(accepts_prefix(pair, "[true,false,"));
  EXPECT_FALSE(matches(pair, "[]"));
  auto anything = grammar_of(json::parse("{}"));
  EXPECT_TRUE(matches(anything, std::string(OutputMatcher::kMaxWhitespace, ' ') + "[]"));
  EXPECT_FALSE(accepts_prefix(anything, std::string(OutputMatcher::kMaxWhitespace + 1, ' ')));
  EXPECT_FALSE(accepts_prefix(anything, std::string(OutputMatcher::kMaxDepth + 1, '[')));
}

TEST(OutputMatcher, LiteralSegmentsAroundAValueRepeat) {
  Result<JsonSchemaGraph> graph = compile_json_schema(json::parse(
      R"({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": false})"));
  ASSERT_TRUE(graph.ok());
  OutputGrammar g;
  const int32_t root = graph->root;
  g.graph = std::move(*graph);
  g.segments = {{false, "<call>", -1}, {true, "", root}, {false, "</call>", -1}, {false, "\n", -1}};
  g.end_at = 3;
  g.loop = true;
  auto shared = std::make_shared<const OutputGrammar>(std::move(g));
  EXPECT_TRUE(matches(shared, R"(<call>{"n":1}</call>)"));
  EXPECT_TRUE(matches(shared, "<call>{\"n\":1}</call>\n<call>{\"n\":2}</call>"));
  EXPECT_FALSE(matches(shared, R"(<call>{"n":1})"));
  EXPECT_FALSE(accepts_prefix(shared, R"( <call>)"));
  EXPECT_FALSE(accepts_prefix(shared, R"(<call>{"n":1}</call><)"));
}

TEST(OutputMatcher, StringLengthCountsCodePointsAndEscapes) {
  auto g = grammar_of(json::parse(R"({"type": "string", "minLength": 2, "maxLength": 3})"));
  EXPECT_FALSE(matches(g, R"("")"));
  EXPECT_FALSE(accepts_prefix(g, R"("a")"));  // closing before minLength is refused
  EXPECT_TRUE(accepts_prefix(g, R"("a)"));
  EXPECT_TRUE(matches(g, R"("ab")"));
  EXPECT_TRUE(matches(g, R"("abc")"));
  EXPECT_FALSE(accepts_prefix(g, R"("abcd)"));  // a fourth character is refused
  EXPECT_TRUE(matches(g, R"("a\n")"));          // an escape is one character
  EXPECT_TRUE(matches(g, R"("\u00e9\n\"")"));
  EXPECT_FALSE(accepts_prefix(g, R"("ab\n\)"));         // no fourth, even begun as an escape
  EXPECT_TRUE(matches(g, "\"\xC3\xA9\xE2\x82\xAC\""));  // two code points in five bytes
  EXPECT_TRUE(accepts_prefix(g, "\"\xC3\xA9\xE2\x82\xAC\xF0\x9F"));  // a third, begun
  EXPECT_FALSE(accepts_prefix(g, "\"abc\xC3"));  // no fourth, even its lead byte
  auto zero = grammar_of(json::parse(R"({"type": "string", "maxLength": 0})"));
  EXPECT_TRUE(matches(zero, R"("")"));
  EXPECT_FALSE(accepts_prefix(zero, R"("a)"));
}

// Every integer in a window against the bounds, as typed: the matcher takes exactly those in range.
void expect_integers_in(const json& schema, int64_t lo, int64_t hi, int64_t from, int64_t to) {
  auto g = grammar_of(schema);
  for (int64_t v = from; v <= to; ++v)
    EXPECT_EQ(matches(g, std::to_string(v)), v >= lo && v <= hi) << schema.dump() << " " << v;
}

TEST(OutputMatcher, IntegerBoundsDigitByDigit) {
  expect_integers_in(json::parse(R"({"type": "integer", "minimum": 0, "maximum": 8})"), 0, 8, -300,
                     300);
  expect_integers_in(json::parse(R"({"type": "integer", "minimum": -20, "maximum": -5})"), -20, -5,
                     -300, 300);
  expect_integers_in(json::parse(R"({"type": "integer", "minimum": -12, "maximum": 140})"), -12,
                     140, -300, 300);
  expect_integers_in(json::parse(R"({"type": "integer", "minimum": 1000})"), 1000,
                     kMaxIntegerMagnitude, 0, 2100);
  expect_integers_in(
      json::parse(R"({"type": "integer", "exclusiveMinimum": 6, "exclusiveMaximum": 8})"), 7, 7,
      -100, 100);
  expect_integers_in(json::parse(R"({"type": "integer", "minimum": 7, "maximum": 7})"), 7, 7, -100,
                     100);
  expect_integers_in(
      json::parse(R"({"type": "integer", "minimum": -2.5, "exclusiveMaximum": 3.5})"), -2, 3, -50,
      50);
  auto g = grammar_of(json::parse(R"({"type": "integer", "minimum": -20, "maximum": -5})"));
  EXPECT_FALSE(accepts_prefix(g, "-3"));  // no value in range begins with -3
  EXPECT_TRUE(accepts_prefix(g, "-1"));   // -10 .. -19 do
  EXPECT_FALSE(accepts_prefix(g, "-0"));
  auto big = grammar_of(json::parse(R"({"type": "integer", "minimum": 1000})"));
  EXPECT_TRUE(accepts_prefix(big, "999"));  // 9990 is still ahead
  EXPECT_FALSE(matches(big, "999"));
  EXPECT_TRUE(matches(big, "9999999999999999"));  // the 16-digit cap
  EXPECT_FALSE(accepts_prefix(big, "99999999999999999"));
  auto positive = grammar_of(json::parse(R"({"type": "integer", "minimum": 0})"));
  EXPECT_FALSE(accepts_prefix(positive, "-"));
  EXPECT_TRUE(matches(positive, "0"));
}

TEST(OutputMatcher, BoundedNumbersAreIntegersInTheBounds) {
  auto g = grammar_of(json::parse(R"({"type": "number", "minimum": 0.5, "maximum": 3.2})"));
  EXPECT_TRUE(matches(g, "1"));
  EXPECT_TRUE(matches(g, "3"));
  EXPECT_FALSE(matches(g, "0"));
  EXPECT_FALSE(matches(g, "4"));
  EXPECT_FALSE(accepts_prefix(g, "1."));
  EXPECT_FALSE(accepts_prefix(g, "1e"));
  auto unbounded = grammar_of(json::parse(R"({"type": "number"})"));
  EXPECT_TRUE(matches(unbounded, "1.5e3"));
  // enum/const values are held to the bounds as written, fractions included.
  auto lits =
      grammar_of(json::parse(R"({"enum": [1, 5, 0.6, "ab", "abcd"], "minimum": 0.5, "maximum": 5,
                                          "exclusiveMaximum": 5, "maxLength": 3})"));
  EXPECT_TRUE(matches(lits, "1"));
  EXPECT_TRUE(matches(lits, "0.6"));
  EXPECT_TRUE(matches(lits, R"("ab")"));
  EXPECT_FALSE(matches(lits, "5"));
  EXPECT_FALSE(matches(lits, R"("abcd")"));
}

TEST(JsonSchema, UnsupportedKeywordsAreNamedErrors) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type": "string", "pattern": "^a"})", "'pattern'"},
      {R"({"type": "object", "properties": {"a": {"type": "string", "format": "email"}}})",
       "/properties/a"},
      {R"({"$ref": "#/$defs/x"})", "'$ref'"},
      {R"({"type": "strange"})", "unknown type"},
      {R"({"type": "object", "required": ["a"], "properties": {}})", "'a'"},
      {R"({"anyOf": []})", "non-empty"},
      {R"({"enum": ["a"], "type": "integer"})", "no value"},
      {R"({"type": "array", "minItems": 3, "maxItems": 1})", "maxItems"},
      {R"(false)", "false"},
      {R"({"properties": {"a\"b": {}}})", "quotes"},
      {R"({"type": "number", "minimum": 0.5, "maximum": 0.7})", "no integer"},
      {R"({"type": "integer", "minimum": 5, "maximum": 3})", "no integer"},
      {R"({"type": "integer", "minimum": 1e17})", "no integer"},
      {R"({"type": "integer", "exclusiveMinimum": true})", "draft-4"},
      {R"({"type": "string", "minLength": 3, "maxLength": 2})", "maxLength"},
      {R"({"type": "string", "minLength": -1})", "minLength"},
      {R"({"anyOf": [{"type": "string"}], "maxLength": 2})", "put it inside"},
      {R"({"enum": [0.4, 0.8], "minimum": 0.5, "maximum": 0.7})", "no value"},
      {R"({"type": "integer", "multipleOf": 2})", "'multipleOf'"},
  };
  for (const auto& [text, expected] : cases) {
    Result<JsonSchemaGraph> g = compile_json_schema(json::parse(text));
    ASSERT_FALSE(g.ok()) << text;
    EXPECT_NE(g.message().find(expected), std::string::npos) << text << " -> " << g.message();
  }
  json deep = json::object();
  for (int i = 0; i < 40; ++i) deep = json{{"type", "array"}, {"items", deep}};
  EXPECT_FALSE(compile_json_schema(deep).ok());
}

// Random walks through the matcher: every output it lets end must parse and match the schema
// (judged by the reference validator), and the walk never dead-ends.
std::string random_output(const std::shared_ptr<const OutputGrammar>& g, std::mt19937_64& rng,
                          bool& ended) {
  static const std::string alphabet = [] {
    std::string a = "\n\xC3\xA9";
    for (char c = ' '; c <= '~'; ++c) a += c;
    return a;
  }();
  OutputMatcher m(g);
  std::string out;
  ended = false;
  for (int step = 0; step < 600; ++step) {
    if (m.may_end() && (m.must_end() || rng() % 4 == 0)) {
      ended = true;
      return out;
    }
    std::vector<char> options;
    for (char c : alphabet) {
      OutputMatcher trial = m;
      if (!trial.feed_byte(static_cast<uint8_t>(c))) continue;
      // Closing and separating bytes weigh more, so walks end within the step budget.
      const int weight = (c == '"' || c == '}' || c == ']') ? 6 : 1;
      options.insert(options.end(), weight, c);
    }
    EXPECT_FALSE(options.empty()) << "dead end after: " << out;
    if (options.empty()) return out;
    const char c = options[rng() % options.size()];
    EXPECT_TRUE(m.feed_byte(static_cast<uint8_t>(c)));
    out += c;
  }
  return out;
}

TEST(OutputMatcher, RandomOutputsParseAndMatchTheirSchema) {
  const char* schemas[] = {
      R"({"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}, "ok": {"type": "boolean"}}, "required": ["name", "n"], "additionalProperties": false})",
      R"({"type": "array", "items": {"anyOf": [{"type": "number"}, {"enum": ["x", "y"]}, {"type": "null"}]}, "maxItems": 4})",
      R"({"type": "object", "properties": {"inner": {"type": "object", "properties": {"v": {"type": ["string", "number"]}}, "required": ["v"], "additionalProperties": false}}, "required": ["inner"], "additionalProperties": false})",
      R"({"oneOf": [{"const": 1}, {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}, "minItems": 1}}, "required": ["a"], "additionalProperties": false}]})",
      R"({"type": "object"})",
      R"({"type": "object", "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 16}, "n": {"type": "integer", "minimum": 0, "maximum": 8}, "x": {"type": "number", "minimum": -3.5, "exclusiveMaximum": 12}, "neg": {"type": "integer", "minimum": -120, "maximum": -95}}, "required": ["name", "n", "x", "neg"], "additionalProperties": false})",
      R"({"type": "array", "items": {"anyOf": [{"type": "string", "minLength": 3, "maxLength": 3}, {"type": "integer", "exclusiveMinimum": -1, "exclusiveMaximum": 1}]}, "maxItems": 3})",
      R"({"type": "array", "items": {"type": "integer", "minimum": 4096, "maximum": 70000}, "maxItems": 3})",
  };
  std::mt19937_64 rng(1234);
  for (const char* text : schemas) {
    const json schema = json::parse(text);
    auto g = grammar_of(schema);
    int ended_count = 0;
    for (int walk = 0; walk < 60; ++walk) {
      bool ended = false;
      const std::string out = random_output(g, rng, ended);
      if (!ended) continue;
      ++ended_count;
      const json value = json::parse(out, nullptr, /*allow_exceptions=*/false);
      ASSERT_FALSE(value.is_discarded()) << text << "\n" << out;
      EXPECT_TRUE(testing::schema_accepts(schema, value)) << text << "\n" << out;
    }
    EXPECT_GT(ended_count, 20) << text;
  }
}

}  // namespace
}  // namespace tangram
