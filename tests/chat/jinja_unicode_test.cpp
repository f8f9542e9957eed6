// Python-compatible string helpers; expected values are what CPython 3 returns.
#include <gtest/gtest.h>

#include "chat/jinja_unicode.h"
#include "chat/jinja_value.h"

namespace tangram::jinja {
namespace {

using Strings = std::vector<std::string>;

TEST(JinjaUnicode, InvalidBytesRoundTrip) {
  const std::string bytes = std::string("ok \xff\xc3(\xe2\x82 end", 12) + "\xf0\x9f\x9a\x80";
  EXPECT_EQ(encode_utf8(decode_utf8(bytes)), bytes);
  EXPECT_EQ(count_code_points("h\xc3\xa9llo \xf0\x9f\x9a\x80"), 7u);
}

TEST(JinjaUnicode, StripUsesPythonWhitespace) {
  const std::string s = "\u3000\u00a0 x y \t\n\u2003";
  EXPECT_EQ(py_strip(s, nullptr, true, true), "x y");
  EXPECT_EQ(py_strip(s, nullptr, true, false), "x y \t\n\u2003");
  EXPECT_EQ(py_strip(s, nullptr, false, true), "\u3000\u00a0 x y");
  EXPECT_EQ(py_strip("  \u0085a\u0085", nullptr, true, true), "a");
  const std::string chars = "xé";
  EXPECT_EQ(py_strip("éxaéx", &chars, true, true), "a");
  // A stray byte at an edge is not whitespace and is kept.
  EXPECT_EQ(py_strip(" a\xff ", nullptr, true, true), "a\xff");
}

TEST(JinjaUnicode, Split) {
  EXPECT_EQ(py_split("a  b\u3000c\u00a0d ", nullptr, -1), (Strings{"a", "b", "c", "d"}));
  EXPECT_EQ(py_split("a  b\u3000c\u00a0d ", nullptr, 1), (Strings{"a", "b\u3000c\u00a0d "}));
  EXPECT_EQ(py_rsplit("a  b\u3000c\u00a0d ", nullptr, 1), (Strings{"a  b\u3000c", "d"}));
  const std::string comma = ",";
  EXPECT_EQ(py_split("a,b,,c", &comma, 2), (Strings{"a", "b", ",c"}));
  EXPECT_EQ(py_rsplit("a,b,,c", &comma, 2), (Strings{"a,b", "", "c"}));
  EXPECT_EQ(py_splitlines("x\r\ny\rz\u2028w\n"), (Strings{"x", "y", "z", "w"}));
  EXPECT_EQ(py_splitlines("\n"), (Strings{""}));
}

TEST(JinjaUnicode, CaseMapping) {
  EXPECT_EQ(py_upper("ÀÉÎõü ÿ ĳ Ωμέγα Привет"), "ÀÉÎÕÜ Ÿ Ĳ ΩΜΈΓΑ ПРИВЕТ");
  EXPECT_EQ(py_lower("ÀÉÎõü Ÿ Ĳ ΩΜΈΓΑ ПРИВЕТ"), "àéîõü ÿ ĳ ωμέγα привет");
  EXPECT_EQ(py_title("héllo wörld ñandú"), "Héllo Wörld Ñandú");
  EXPECT_EQ(py_capitalize("éCOLE"), "École");
}

TEST(JinjaUnicode, Replace) {
  EXPECT_EQ(py_replace("aaa", "", "-", -1, 100).value(), "-a-a-a-");
  EXPECT_EQ(py_replace("aaa", "", "-", 2, 100).value(), "-a-aa");
  EXPECT_EQ(py_replace("abcabc", "b", "XX", 1, 100).value(), "aXXcabc");
  // The result may not grow past the limit, whichever way it grows.
  EXPECT_EQ(py_replace("abcabc", "b", "XX", -1, 8).value(), "aXXcaXXc");
  EXPECT_FALSE(py_replace("abcabc", "b", "XX", -1, 7).ok());
  EXPECT_FALSE(py_replace("aaaa", "", "--", -1, 9).ok());
  EXPECT_FALSE(py_replace(std::string(100, 'x'), "y", "z", -1, 99).ok());
}

TEST(JinjaValue, PythonFloatRepr) {
  EXPECT_EQ(format_py_float(1.0), "1.0");
  EXPECT_EQ(format_py_float(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(format_py_float(1e16), "1e+16");
  EXPECT_EQ(format_py_float(1234567890123456.0), "1234567890123456.0");
  EXPECT_EQ(format_py_float(1e-5), "1e-05");
  EXPECT_EQ(format_py_float(0.0001), "0.0001");
  EXPECT_EQ(format_py_float(-0.0), "-0.0");
  EXPECT_EQ(format_py_float(1.5e300), "1.5e+300");
}

TEST(JinjaValue, ReprAndEquality) {
  EXPECT_EQ(to_py_repr(Value::string("it's")), "\"it's\"");
  EXPECT_EQ(to_py_repr(Value::string("a'b\"c\n")), "'a\\'b\"c\\n'");
  EXPECT_EQ(to_py_str(Value::list(List{Value::integer(1)}, Seq::kTuple)), "(1,)");
  EXPECT_TRUE(py_equal(Value::integer(1), Value::number(1.0)));
  EXPECT_TRUE(py_equal(Value::boolean(true), Value::integer(1)));
  EXPECT_FALSE(py_equal(Value::list(List{}), Value::list(List{}, Seq::kTuple)));
  EXPECT_FALSE(truthy(Value::list(List{})));
  EXPECT_TRUE(truthy(Value::list(List{}, Seq::kGenerator)));  // a generator is always truthy
  Dict d;
  ASSERT_TRUE(d.set(Value::integer(1), Value::string("one")).ok());
  EXPECT_NE(d.find(Value::number(1.0)), nullptr);  // 1 and 1.0 are the same key
  EXPECT_EQ(d.find(Value::string("1")), nullptr);
  EXPECT_FALSE(d.set(Value::list(List{}), Value::none()).ok());  // unhashable
}

}  // namespace
}  // namespace tangram::jinja
