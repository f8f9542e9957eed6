#include "chat/jinja_format.h"

#include <cmath>

#include "chat/jinja_unicode.h"

namespace tangram::jinja {

namespace {

struct Spec {
  bool left = false, zero = false, plus = false, space = false, alt = false;
  size_t width = 0;
  int precision = -1;
  char conversion = 's';
};

// Pads `body` (with its sign already in front) to the spec's width, in code points.
std::string pad(std::string body, const Spec& spec, bool numeric) {
  const size_t len = count_code_points(body);
  if (len >= spec.width) return body;
  const size_t fill = spec.width - len;
  if (spec.left) return body + std::string(fill, ' ');
  if (numeric && spec.zero) {
    const size_t sign =
        (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) ? 1 : 0;
    return body.substr(0, sign) + std::string(fill, '0') + body.substr(sign);
  }
  return std::string(fill, ' ') + body;
}

std::string sign_prefix(bool negative, const Spec& spec) {
  if (negative) return "-";
  if (spec.plus) return "+";
  return spec.space ? " " : "";
}

Result<std::string> format_one(const Value& arg, const Spec& spec) {
  const char c = spec.conversion;
  if (c == 's' || c == 'r' || c == 'a') {
    std::string s = c == 's' ? to_py_str(arg) : to_py_repr(arg);
    if (spec.precision >= 0) {
      const std::u32string cps = decode_utf8(s);
      s = encode_utf8(std::u32string_view(cps).substr(
          0, std::min(cps.size(), static_cast<size_t>(spec.precision))));
    }
    return pad(std::move(s), spec, false);
  }
  if (c == 'c') {
    std::string out;
    if (arg.is_int() && arg.as_int() >= 0 && arg.as_int() <= 0x10FFFF) {
      append_utf8(out, static_cast<char32_t>(arg.as_int()));
    } else if (arg.is_string() && count_code_points(arg.as_string()) == 1) {
      out = arg.as_string();
    } else {
      return make_error("%c requires an int or a single character");
    }
    return pad(std::move(out), spec, false);
  }
  if (!arg.is_number())
    return make_error("%{} format: a real number is required, not {}", c, type_name(arg));
  if (c == 'd' || c == 'i' || c == 'u' || c == 'x' || c == 'X' || c == 'o') {
    if (arg.is_float() && (c == 'x' || c == 'X' || c == 'o'))
      return make_error("%{} format: an integer is required, not float", c);
    const double d = arg.as_double();
    if (arg.is_float() && (!std::isfinite(d) || std::fabs(d) >= 9.2e18))
      return make_error("cannot convert float {} to integer", format_py_float(d));
    const int64_t v = arg.is_float() ? static_cast<int64_t>(d) : arg.as_integral();
    const uint64_t mag = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
    std::string digits = c == 'x'   ? fmt::format("{:x}", mag)
                         : c == 'X' ? fmt::format("{:X}", mag)
                         : c == 'o' ? fmt::format("{:o}", mag)
                                    : fmt::format("{}", mag);
    if (spec.alt && c != 'd' && c != 'i' && c != 'u')
      digits = (c == 'o' ? "0o" : c == 'x' ? "0x" : "0X") + digits;
    return pad(sign_prefix(v < 0, spec) + digits, spec, true);
  }
  if (c == 'f' || c == 'F' || c == 'e' || c == 'E' || c == 'g' || c == 'G') {
    const double d = arg.as_double();
    const int precision = spec.precision < 0 ? 6 : std::min(spec.precision, 300);
    std::string body;
    if (std::isnan(d)) {
      body = (c >= 'a') ? "nan" : "NAN";
    } else if (std::isinf(d)) {
      body = (c >= 'a') ? "inf" : "INF";
    } else {
      const std::string type(1, c);
      body = fmt::format(fmt::runtime(std::string(spec.alt ? "{:#." : "{:.") +
                                      std::to_string(precision) + type + "}"),
                         std::fabs(d));
    }
    return pad(sign_prefix(std::signbit(d) && !std::isnan(d), spec) + body, spec, std::isfinite(d));
  }
  return make_error("unsupported format character '{}'", c);
}

}  // namespace

Result<Value> py_percent_format(const std::string& format, const Value& args) {
  std::vector<Value> positional;
  if (args.is_list() && args.seq() == Seq::kTuple)
    positional = args.as_list();
  else
    positional.push_back(args);
  // Python treats any non-tuple object with __getitem__ (dict, list, Undefined) as a mapping, which
  // also waives the "not all arguments converted" check.
  const bool mapping_like =
      args.is_dict() || args.is_undefined() || (args.is_list() && args.seq() != Seq::kTuple);
  size_t next = 0;
  bool used_key = false;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) return make_error("incomplete format");
    if (format[i] == '%') {
      out += '%';
      continue;
    }
    const Value* arg = nullptr;
    Value keyed;
    if (format[i] == '(') {
      const size_t close = format.find(')', i);
      if (close == std::string::npos) return make_error("incomplete format key");
      if (!args.is_dict()) return make_error("format requires a mapping");
      const Value* v = args.as_dict().find(std::string_view(format).substr(i + 1, close - i - 1));
      if (!v) return make_error("format key '{}' not found", format.substr(i + 1, close - i - 1));
      keyed = *v;
      arg = &keyed;
      used_key = true;
      i = close + 1;
    }
    Spec spec;
    for (; i < format.size(); ++i) {
      const char f = format[i];
      if (f == '-')
        spec.left = true;
      else if (f == '0')
        spec.zero = true;
      else if (f == '+')
        spec.plus = true;
      else if (f == ' ')
        spec.space = true;
      else if (f == '#')
        spec.alt = true;
      else
        break;
    }
    for (; i < format.size() && format[i] >= '0' && format[i] <= '9'; ++i) {
      spec.width = spec.width * 10 + static_cast<size_t>(format[i] - '0');
      if (spec.width > 4096) return make_error("format width too large");
    }
    if (i < format.size() && format[i] == '.') {
      spec.precision = 0;
      for (++i; i < format.size() && format[i] >= '0' && format[i] <= '9'; ++i) {
        spec.precision = spec.precision * 10 + (format[i] - '0');
        if (spec.precision > 4096) return make_error("format precision too large");
      }
    }
    if (i < format.size() && (format[i] == '*')) return make_error("'*' widths are not supported");
    while (i < format.size() && (format[i] == 'h' || format[i] == 'l' || format[i] == 'L')) ++i;
    if (i >= format.size()) return make_error("incomplete format");
    spec.conversion = format[i];
    if (!arg) {
      if (next >= positional.size()) return make_error("not enough arguments for format string");
      arg = &positional[next++];
    }
    try {
      TG_ASSIGN(std::string piece, format_one(*arg, spec));
      out += piece;
    } catch (const std::exception& e) {  // fmt rejects a spec: report, never propagate
      return make_error("bad format specification: {}", e.what());
    }
  }
  if (!used_key && !mapping_like && next < positional.size())
    return make_error("not all arguments converted during string formatting");
  return Value::string(std::move(out));
}

}  // namespace tangram::jinja
