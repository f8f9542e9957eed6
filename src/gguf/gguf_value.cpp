// GGUF metadata value types: names and human-readable rendering (for `tangram info`).
#include <algorithm>

#include <fmt/format.h>

#include "gguf/gguf_file.h"

namespace tangram {

std::string_view gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::UINT8:
      return "u8";
    case GgufValueType::INT8:
      return "i8";
    case GgufValueType::UINT16:
      return "u16";
    case GgufValueType::INT16:
      return "i16";
    case GgufValueType::UINT32:
      return "u32";
    case GgufValueType::INT32:
      return "i32";
    case GgufValueType::FLOAT32:
      return "f32";
    case GgufValueType::BOOL:
      return "bool";
    case GgufValueType::STRING:
      return "string";
    case GgufValueType::ARRAY:
      return "array";
    case GgufValueType::UINT64:
      return "u64";
    case GgufValueType::INT64:
      return "i64";
    case GgufValueType::FLOAT64:
      return "f64";
  }
  return "unknown";
}

bool gguf_type_is_unsigned(GgufValueType t) {
  return t == GgufValueType::UINT8 || t == GgufValueType::UINT16 || t == GgufValueType::UINT32 ||
         t == GgufValueType::UINT64;
}

bool gguf_type_is_signed(GgufValueType t) {
  return t == GgufValueType::INT8 || t == GgufValueType::INT16 || t == GgufValueType::INT32 ||
         t == GgufValueType::INT64;
}

bool gguf_type_is_float(GgufValueType t) {
  return t == GgufValueType::FLOAT32 || t == GgufValueType::FLOAT64;
}

namespace {

// Quoted, with control characters, quotes and backslashes escaped so one value stays on one line.
void append_quoted(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (byte < 0x20 || byte == 0x7f) {
          out += fmt::format("\\x{:02x}", byte);
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// float32 values are stored widened to double; print them at float precision ("0.1", not
// "0.10000000149011612").
std::string format_float(GgufValueType t, double v) {
  if (t == GgufValueType::FLOAT32) return fmt::format("{}", static_cast<float>(v));
  return fmt::format("{}", v);
}

std::string format_int(GgufValueType t, int64_t v) {
  // u64 array elements are stored as their bit pattern in int64_t.
  if (t == GgufValueType::UINT64) return fmt::format("{}", static_cast<uint64_t>(v));
  if (t == GgufValueType::BOOL) return v ? "true" : "false";
  return fmt::format("{}", v);
}

}  // namespace

std::string GgufValue::to_string(size_t max_items) const {
  if (type == GgufValueType::STRING) {
    std::string out;
    append_quoted(out, s);
    return out;
  }
  if (type == GgufValueType::BOOL) return b ? "true" : "false";
  if (gguf_type_is_unsigned(type)) return fmt::format("{}", u);
  if (gguf_type_is_signed(type)) return fmt::format("{}", i);
  if (gguf_type_is_float(type)) return format_float(type, f);
  if (type != GgufValueType::ARRAY) return "<invalid>";

  // Count from the vector the element type selects, so an inconsistent value cannot index past it.
  const size_t n = elem_type == GgufValueType::STRING || elem_type == GgufValueType::ARRAY
                       ? strings.size()
                   : gguf_type_is_float(elem_type) ? floats.size()
                                                   : ints.size();
  const size_t shown = std::min(n, max_items);
  std::string out = "[";
  for (size_t k = 0; k < shown; ++k) {
    if (k) out += ", ";
    if (elem_type == GgufValueType::STRING) {
      append_quoted(out, strings[k]);
    } else if (elem_type == GgufValueType::ARRAY) {
      out += strings[k];  // nested arrays are stored already rendered
    } else if (gguf_type_is_float(elem_type)) {
      out += format_float(elem_type, floats[k]);
    } else {
      out += format_int(elem_type, ints[k]);
    }
  }
  if (shown < n) out += fmt::format("{}... ({} items)", shown ? ", " : "", n);
  out += ']';
  return out;
}

}  // namespace tangram
