#include "common/json_parse.h"

#include <string>

#include <fmt/format.h>

namespace tangram {
namespace {

// nlohmann's own DOM builder behind a gate: every event is counted first, and the parse stops
// (the builder never sees the event) once the input nests too deep or holds too many values.
// nlohmann's parser itself keeps its nesting in a heap vector, so nothing here recurses.
template <typename Json>
class LimitedDomBuilder {
 public:
  using number_integer_t = typename Json::number_integer_t;
  using number_unsigned_t = typename Json::number_unsigned_t;
  using number_float_t = typename Json::number_float_t;
  using string_t = typename Json::string_t;
  using binary_t = typename Json::binary_t;

  LimitedDomBuilder(Json& root, const JsonLimits& limits)
      : dom_(root, /*allow_exceptions=*/false), limits_(limits) {}

  bool null() { return value() && dom_.null(); }
  bool boolean(bool v) { return value() && dom_.boolean(v); }
  bool number_integer(number_integer_t v) { return value() && dom_.number_integer(v); }
  bool number_unsigned(number_unsigned_t v) { return value() && dom_.number_unsigned(v); }
  bool number_float(number_float_t v, const string_t& s) {
    return value() && dom_.number_float(v, s);
  }
  bool string(string_t& s) { return value() && dom_.string(s); }
  bool binary(binary_t& b) { return value() && dom_.binary(b); }
  bool start_object(std::size_t n) { return open() && dom_.start_object(n); }
  bool key(string_t& k) { return dom_.key(k); }
  bool end_object() {
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) { return open() && dom_.start_array(n); }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& ex) {
    // out_of_range (a number like 1e400) comes here too; its text names the byte position.
    if (error_.empty()) error_ = ex.what();
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  bool value() {
    if (++values_ <= limits_.max_values) return true;
    if (error_.empty())
      error_ = fmt::format("the JSON holds more than {} values", limits_.max_values);
    return false;
  }
  bool open() {
    if (!value()) return false;
    if (++depth_ <= limits_.max_depth) return true;
    if (error_.empty())
      error_ = fmt::format("the JSON nests deeper than {} levels", limits_.max_depth);
    return false;
  }

  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  JsonLimits limits_;
  size_t depth_ = 0;
  size_t values_ = 0;
  std::string error_;
};

template <typename Json>
Result<Json> parse_limited(std::string_view text, const JsonLimits& limits) {
  Json root;
  {
    LimitedDomBuilder<Json> builder(root, limits);
    const bool ok = Json::sax_parse(text.begin(), text.end(), &builder);
    if (!ok) {
      std::string why = builder.error().empty() ? std::string("not valid JSON") : builder.error();
      return Error{
          std::move(why)};  // `root` (a partial tree, within the limits) goes with this frame
    }
  }
  return root;
}

}  // namespace

Result<nlohmann::json> parse_json(std::string_view text, const JsonLimits& limits) {
  return parse_limited<nlohmann::json>(text, limits);
}

Result<nlohmann::ordered_json> parse_ordered_json(std::string_view text, const JsonLimits& limits) {
  return parse_limited<nlohmann::ordered_json>(text, limits);
}

nlohmann::json parse_json_or_discarded(std::string_view text, const JsonLimits& limits) {
  auto j = parse_limited<nlohmann::json>(text, limits);
  return j ? std::move(j).value() : nlohmann::json(nlohmann::json::value_t::discarded);
}

}  // namespace tangram
