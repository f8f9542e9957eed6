#include "chat/jinja_json.h"

#include <algorithm>
#include <cmath>

#include "chat/jinja_unicode.h"

namespace tangram::jinja {

namespace {

template <typename Json>
Result<Value> convert(const Json& j, uint32_t depth) {
  if (depth > kMaxJsonDepth) return make_error("JSON nested deeper than {} levels", kMaxJsonDepth);
  switch (j.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value::integer(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value::number(j.template get<double>());
    case nlohmann::json::value_t::string:
      return Value::string(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& item : j) {
        TG_ASSIGN(Value v, convert(item, depth + 1));
        items.push_back(std::move(v));
      }
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Dict d;
      for (const auto& [key, item] : j.items()) {
        TG_ASSIGN(Value v, convert(item, depth + 1));
        d.set(key, std::move(v));
      }
      return Value::dict(std::move(d));
    }
    case nlohmann::json::value_t::binary:
      return make_error("binary JSON values are not supported");
  }
  return Value::none();
}

void append_json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (char32_t c : decode_utf8(s)) {
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20 || (ensure_ascii && c > 0x7E)) {
      if (c > 0xFFFF) {  // UTF-16 surrogate pair, as Python writes it
        const char32_t v = c - 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", static_cast<uint32_t>(0xD800 + (v >> 10)),
                           static_cast<uint32_t>(0xDC00 + (v & 0x3FF)));
      } else {
        out += fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
      }
    } else {
      append_utf8(out, c);
    }
  }
  out += '"';
}

struct Dumper {
  const JsonDumpOptions& options;
  std::string item_sep;
  std::string key_sep;
  std::string out;

  void newline(int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += *options.indent;
  }

  Status dump(const Value& v, int level) {
    switch (v.kind()) {
      case Kind::kNone:
        out += "null";
        return {};
      case Kind::kBool:
        out += v.as_bool() ? "true" : "false";
        return {};
      case Kind::kInt:
        out += std::to_string(v.as_int());
        return {};
      case Kind::kFloat: {
        const double d = v.as_float();
        if (std::isnan(d))
          out += "NaN";
        else if (std::isinf(d))
          out += d > 0 ? "Infinity" : "-Infinity";
        else
          out += format_py_float(d);
        return {};
      }
      case Kind::kString:
        append_json_string(out, v.as_string(), options.ensure_ascii);
        return {};
      case Kind::kList: {
        if (!v.is_indexable_list())
          return make_error("Object of type {} is not JSON serializable", type_name(v));
        const List& items = v.as_list();
        if (items.empty()) {
          out += "[]";
          return {};
        }
        out += '[';
        if (options.indent) newline(level + 1);
        for (size_t i = 0; i < items.size(); ++i) {
          if (i > 0) {
            out += item_sep;
            if (options.indent) newline(level + 1);
          }
          TG_TRY(dump(items[i], level + 1));
        }
        if (options.indent) newline(level);
        out += ']';
        return {};
      }
      case Kind::kDict: {
        std::vector<const std::pair<Value, Value>*> entries;
        for (const auto& entry : v.as_dict().entries()) entries.push_back(&entry);
        if (entries.empty()) {
          out += "{}";
          return {};
        }
        if (options.sort_keys) {
          // Python sorts the original keys, so mixing strings and numbers is an error.
          for (const auto* e : entries) {
            if (e->first.is_string() != entries[0]->first.is_string())
              return make_error("'<' not supported between instances of 'str' and '{}'",
                                type_name(e->first.is_string() ? entries[0]->first : e->first));
          }
          std::stable_sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) {
            auto r = py_less(a->first, b->first);
            return r.ok() && r.value();
          });
        }
        out += '{';
        if (options.indent) newline(level + 1);
        for (size_t i = 0; i < entries.size(); ++i) {
          if (i > 0) {
            out += item_sep;
            if (options.indent) newline(level + 1);
          }
          TG_ASSIGN(std::string key, json_key(entries[i]->first));
          append_json_string(out, key, options.ensure_ascii);
          out += key_sep;
          TG_TRY(dump(entries[i]->second, level + 1));
        }
        if (options.indent) newline(level);
        out += '}';
        return {};
      }
      default:
        return make_error("Object of type {} is not JSON serializable", type_name(v));
    }
  }
};

}  // namespace

Result<Value> value_from_json(const nlohmann::json& j) { return convert(j, 0); }
Result<Value> value_from_json(const nlohmann::ordered_json& j) { return convert(j, 0); }

Result<nlohmann::ordered_json> value_to_json(const Value& v) {
  switch (v.kind()) {
    case Kind::kNone:
      return nlohmann::ordered_json(nullptr);
    case Kind::kBool:
      return nlohmann::ordered_json(v.as_bool());
    case Kind::kInt:
      return nlohmann::ordered_json(v.as_int());
    case Kind::kFloat:
      return nlohmann::ordered_json(v.as_float());
    case Kind::kString:
      return nlohmann::ordered_json(v.as_string());
    case Kind::kList: {
      if (!v.is_indexable_list())
        return make_error("Object of type {} is not JSON serializable", type_name(v));
      auto out = nlohmann::ordered_json::array();
      for (const Value& item : v.as_list()) {
        TG_ASSIGN(auto j, value_to_json(item));
        out.push_back(std::move(j));
      }
      return out;
    }
    case Kind::kDict: {
      auto out = nlohmann::ordered_json::object();
      for (const auto& [key, item] : v.as_dict().entries()) {
        TG_ASSIGN(auto j, value_to_json(item));
        TG_ASSIGN(std::string k, json_key(key));
        out[k] = std::move(j);
      }
      return out;
    }
    default:
      return make_error("Object of type {} is not JSON serializable", type_name(v));
  }
}

Result<std::string> py_json_dumps(const Value& v, const JsonDumpOptions& options) {
  Dumper d{options, options.indent ? "," : ", ", ": ", {}};
  if (options.separators) {
    d.item_sep = options.separators->first;
    d.key_sep = options.separators->second;
  }
  TG_TRY(d.dump(v, 0));
  return std::move(d.out);
}

}  // namespace tangram::jinja
