// Parses GGUF v2/v3 images. Layout (all little-endian):
//   "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//   n_kv x { string key | u32 value type | value }
//   n_tensors x { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml type | u64 offset }
//   padding to `alignment` | tensor data (each tensor at data_offset + offset)
// where string = u64 length + bytes and array = u32 elem type + u64 count + elements.
// Every count and length is checked against the bytes left before anything is allocated.
#include "gguf/gguf_parser.h"

#include <bit>
#include <cstring>
#include <limits>

#include <fmt/format.h>

namespace tangram {

static_assert(std::endian::native == std::endian::little,
              "GGUF parsing assumes a little-endian host");

namespace {

constexpr uint32_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 8;  // arrays of arrays nested deeper than this are refused
// Metadata arrays in real files hold at most a few hundred thousand items (vocabularies,
// merges). The cap bounds the memory a corrupt length can make us allocate: items are widened
// in memory (a u8 becomes an int64_t, a string a std::string), so "fits in the bytes left"
// alone would still allow several times the file size.
constexpr uint64_t kMaxArrayLength = uint64_t{1} << 24;
// Upper bound for up-front reservations; longer directories grow as they are read.
constexpr size_t kMaxReserve = 4096;
constexpr uint32_t kMaxValueType = static_cast<uint32_t>(GgufValueType::FLOAT64);
// Smallest encodings, used to bound counts by the bytes left: a kv is an empty key (8), a
// type (4) and a one-byte value; a tensor info is an empty name (8), n_dims (4), type (4) and
// offset (8) with zero dims.
constexpr size_t kMinKvBytes = 8 + 4 + 1;
constexpr size_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;

// Bytes of one element of a fixed-size value type; 0 for STRING and ARRAY.
size_t fixed_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::UINT8:
    case GgufValueType::INT8:
    case GgufValueType::BOOL:
      return 1;
    case GgufValueType::UINT16:
    case GgufValueType::INT16:
      return 2;
    case GgufValueType::UINT32:
    case GgufValueType::INT32:
    case GgufValueType::FLOAT32:
      return 4;
    case GgufValueType::UINT64:
    case GgufValueType::INT64:
    case GgufValueType::FLOAT64:
      return 8;
    case GgufValueType::STRING:
    case GgufValueType::ARRAY:
      return 0;
  }
  return 0;
}

// Smallest on-disk size of one array element of type t.
size_t min_elem_size(GgufValueType t) {
  if (t == GgufValueType::STRING) return 8;     // length only
  if (t == GgufValueType::ARRAY) return 4 + 8;  // elem type + count
  return fixed_size(t);
}

// Names of ggml type ids Tangram does not load, so the refusal says what the file holds.
std::string_view ggml_foreign_type_name(uint32_t id) {
  static constexpr std::string_view kNames[] = {
      "F32",   "F16",        "Q4_0",       "Q4_1",       "Q4_2",     "Q4_3",     "Q5_0",
      "Q5_1",  "Q8_0",       "Q8_1",       "Q2_K",       "Q3_K",     "Q4_K",     "Q5_K",
      "Q6_K",  "Q8_K",       "IQ2_XXS",    "IQ2_XS",     "IQ3_XXS",  "IQ1_S",    "IQ4_NL",
      "IQ3_S", "IQ2_S",      "IQ4_XS",     "I8",         "I16",      "I32",      "I64",
      "F64",   "IQ1_M",      "BF16",       "Q4_0_4_4",   "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",
      "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4",
  };
  return id < std::size(kNames) ? kNames[id] : std::string_view("unknown");
}

bool is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Reads one element of a fixed-size integer/bool type from p as a sign-correct int64 (u64
// keeps its bit pattern).
int64_t load_int(GgufValueType t, const uint8_t* p) {
  switch (t) {
    case GgufValueType::UINT8:
    case GgufValueType::BOOL:
      return p[0];
    case GgufValueType::INT8:
      return static_cast<int8_t>(p[0]);
    case GgufValueType::UINT16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case GgufValueType::INT16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case GgufValueType::UINT32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case GgufValueType::INT32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case GgufValueType::UINT64: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<int64_t>(v);
    }
    case GgufValueType::INT64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    default:
      return 0;
  }
}

double load_float(GgufValueType t, const uint8_t* p) {
  if (t == GgufValueType::FLOAT32) {
    float v;
    std::memcpy(&v, p, 4);
    return static_cast<double>(v);
  }
  double v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

Status GgufParser::parse(GgufFile& file) { return GgufParser(file).run(); }

size_t GgufParser::file_size() const { return f_.size_; }

Error GgufParser::fail(size_t offset, std::string_view problem) const {
  if (context_.empty()) return make_error("{}: offset {}: {}", f_.path_, offset, problem);
  return make_error("{}: offset {}: {}: {}", f_.path_, offset, context_, problem);
}

template <typename T>
Status GgufParser::read_raw(T& out, std::string_view what) {
  if (remaining() < sizeof(T)) {
    return fail(pos_, fmt::format("unexpected end of file reading {} (need {} bytes, {} left)",
                                  what, sizeof(T), remaining()));
  }
  std::memcpy(&out, f_.base_ + pos_, sizeof(T));
  pos_ += sizeof(T);
  return {};
}

Status GgufParser::read_string(std::string& out, std::string_view what) {
  const size_t at = pos_;
  uint64_t len = 0;
  // Checked here rather than via read_raw so the hot path (one call per token) formats nothing.
  if (remaining() < sizeof(len)) {
    return fail(at, fmt::format("unexpected end of file reading {} length (need 8 bytes, {} left)",
                                what, remaining()));
  }
  std::memcpy(&len, f_.base_ + pos_, sizeof(len));
  pos_ += sizeof(len);
  if (len > remaining()) {
    return fail(at, fmt::format("{} length {} exceeds the {} bytes left in the file (file size {})",
                                what, len, remaining(), file_size()));
  }
  out.assign(reinterpret_cast<const char*>(f_.base_ + pos_), static_cast<size_t>(len));
  pos_ += static_cast<size_t>(len);
  return {};
}

Status GgufParser::read_type(GgufValueType& out, std::string_view what) {
  const size_t at = pos_;
  uint32_t raw = 0;
  TG_TRY(read_raw(raw, what));
  if (raw > kMaxValueType) return fail(at, fmt::format("unknown {} {}", what, raw));
  out = static_cast<GgufValueType>(raw);
  return {};
}

Status GgufParser::run() {
  uint64_t n_tensors = 0;
  uint64_t n_kv = 0;
  TG_TRY(read_header(n_tensors, n_kv));

  f_.kv_.reserve(std::min<size_t>(static_cast<size_t>(n_kv), kMaxReserve));
  for (uint64_t k = 0; k < n_kv; ++k) TG_TRY(read_kv(k));
  context_.clear();

  // Recheck against what is left now that the metadata is consumed.
  if (n_tensors > remaining() / kMinTensorInfoBytes) {
    return fail(pos_, fmt::format("tensor count {} exceeds what the {} bytes left can hold",
                                  n_tensors, remaining()));
  }
  f_.tensors_.reserve(std::min<size_t>(static_cast<size_t>(n_tensors), kMaxReserve));
  std::vector<size_t> info_offsets;  // [n_tensors] file offset of each tensor info
  info_offsets.reserve(f_.tensors_.capacity());
  for (uint64_t t = 0; t < n_tensors; ++t) {
    size_t info_at = 0;
    TG_TRY(read_tensor_info(t, info_at));
    info_offsets.push_back(info_at);
  }
  context_.clear();

  // The data section starts at the next multiple of the alignment (overflow-safe round-up).
  const size_t align = f_.alignment_;
  const size_t pad = (align - pos_ % align) % align;
  if (n_tensors > 0 && pad > remaining()) {
    return fail(
        pos_,
        fmt::format("data section would start at {} (aligned to {}), past the end of the file "
                    "(file size {})",
                    pos_ + pad, align, file_size()));
  }
  // A file without tensors may end right after its metadata, without padding.
  f_.data_offset_ = pad <= remaining() ? pos_ + pad : file_size();
  for (size_t t = 0; t < f_.tensors_.size(); ++t)
    TG_TRY(check_tensor_data(f_.tensors_[t], info_offsets[t]));
  return {};
}

Status GgufParser::read_header(uint64_t& n_tensors, uint64_t& n_kv) {
  if (remaining() < 4) {
    return fail(0, fmt::format("unexpected end of file reading magic (need 4 bytes, {} left)",
                               remaining()));
  }
  if (std::memcmp(f_.base_, "GGUF", 4) != 0) {
    return fail(0, fmt::format("bad magic {:02x} {:02x} {:02x} {:02x} (not a GGUF file)",
                               f_.base_[0], f_.base_[1], f_.base_[2], f_.base_[3]));
  }
  pos_ = 4;
  uint32_t version = 0;
  TG_TRY(read_raw(version, "version"));
  if (version == 1) return fail(4, "GGUF version 1 is not supported (supported: 2, 3)");
  if (version != 2 && version != 3) {
    const uint32_t swapped = __builtin_bswap32(version);
    if (swapped >= 1 && swapped <= 3)
      return fail(4, fmt::format("big-endian GGUF file (version {} byte-swapped) is not supported",
                                 swapped));
    return fail(4, fmt::format("unsupported GGUF version {} (supported: 2, 3)", version));
  }
  f_.version_ = version;

  const size_t tensors_at = pos_;
  TG_TRY(read_raw(n_tensors, "tensor count"));
  const size_t kv_at = pos_;
  TG_TRY(read_raw(n_kv, "metadata count"));
  if (n_kv > remaining() / kMinKvBytes) {
    return fail(kv_at, fmt::format("metadata count {} exceeds what the {} bytes left can hold",
                                   n_kv, remaining()));
  }
  if (n_tensors > remaining() / kMinTensorInfoBytes) {
    return fail(tensors_at, fmt::format("tensor count {} exceeds what the {} bytes left can hold",
                                        n_tensors, remaining()));
  }
  return {};
}

Status GgufParser::read_kv(uint64_t index) {
  context_ = fmt::format("metadata entry {}", index);
  const size_t key_at = pos_;
  GgufKV kv;
  TG_TRY(read_string(kv.key, "key"));
  if (f_.kv_index_.find(kv.key) != f_.kv_index_.end())
    return fail(key_at, fmt::format("duplicate metadata key '{}'", kv.key));
  context_ = fmt::format("metadata key '{}'", kv.key);
  GgufValueType type;
  TG_TRY(read_type(type, "value type"));
  const size_t value_at = pos_;
  TG_TRY(read_value(type, kv.value, 0));
  if (kv.key == "general.alignment") TG_TRY(apply_alignment(kv.value, value_at));
  f_.kv_index_.emplace(kv.key, f_.kv_.size());
  f_.kv_.push_back(std::move(kv));
  return {};
}

Status GgufParser::read_value(GgufValueType type, GgufValue& out, int depth) {
  out.type = type;
  if (type == GgufValueType::STRING) return read_string(out.s, "string");
  if (type == GgufValueType::ARRAY) return read_array(out, depth);

  const size_t at = pos_;
  const size_t n = fixed_size(type);
  if (remaining() < n) {
    return fail(at, fmt::format("unexpected end of file reading {} value (need {} bytes, {} left)",
                                gguf_value_type_name(type), n, remaining()));
  }
  const uint8_t* p = f_.base_ + pos_;
  pos_ += n;
  if (gguf_type_is_float(type)) {
    out.f = load_float(type, p);
    return {};
  }
  out.i = load_int(type, p);
  out.u = static_cast<uint64_t>(out.i);
  if (type == GgufValueType::BOOL) {
    if (p[0] > 1) return fail(at, fmt::format("invalid bool value {}", p[0]));
    out.b = p[0] != 0;
  }
  return {};
}

Status GgufParser::read_array(GgufValue& out, int depth) {
  const size_t at = pos_;
  if (depth >= kMaxArrayDepth)
    return fail(at,
                fmt::format("arrays nested more than {} deep are not supported", kMaxArrayDepth));
  GgufValueType elem;
  TG_TRY(read_type(elem, "array element type"));
  out.elem_type = elem;
  const size_t count_at = pos_;
  uint64_t count = 0;
  TG_TRY(read_raw(count, "array length"));
  const size_t min_size = min_elem_size(elem);
  if (count > remaining() / min_size) {
    return fail(count_at,
                fmt::format("array length {} of {} exceeds what the {} bytes left can hold", count,
                            gguf_value_type_name(elem), remaining()));
  }
  if (count > kMaxArrayLength) {
    return fail(count_at, fmt::format("array length {} exceeds the supported maximum {}", count,
                                      kMaxArrayLength));
  }
  const auto n = static_cast<size_t>(count);

  if (elem == GgufValueType::STRING) {
    out.strings.resize(n);
    for (size_t k = 0; k < n; ++k) TG_TRY(read_string(out.strings[k], "array string"));
    return {};
  }
  if (elem == GgufValueType::ARRAY) {
    // Arrays of arrays are rare (no model key Tangram reads uses them): validate each inner
    // array fully and keep its rendering.
    out.strings.resize(n);
    for (size_t k = 0; k < n; ++k) {
      GgufValue inner;
      TG_TRY(read_array(inner, depth + 1));
      inner.type = GgufValueType::ARRAY;
      out.strings[k] = inner.to_string();
    }
    return {};
  }

  // Fixed-size elements: the length check above already guarantees n * min_size bytes.
  const uint8_t* p = f_.base_ + pos_;
  if (gguf_type_is_float(elem)) {
    out.floats.resize(n);
    for (size_t k = 0; k < n; ++k) out.floats[k] = load_float(elem, p + k * min_size);
  } else {
    out.ints.resize(n);
    for (size_t k = 0; k < n; ++k) {
      out.ints[k] = load_int(elem, p + k * min_size);
      if (elem == GgufValueType::BOOL && out.ints[k] > 1)
        return fail(pos_ + k,
                    fmt::format("invalid bool value {} at array index {}", out.ints[k], k));
    }
  }
  pos_ += n * min_size;
  return {};
}

Status GgufParser::apply_alignment(const GgufValue& v, size_t value_offset) {
  uint64_t a = 0;
  if (gguf_type_is_unsigned(v.type)) {
    a = v.u;
  } else if (gguf_type_is_signed(v.type) && v.i > 0) {
    a = static_cast<uint64_t>(v.i);
  } else if (!gguf_type_is_signed(v.type)) {
    return fail(value_offset, fmt::format("general.alignment must be an integer, not {}",
                                          gguf_value_type_name(v.type)));
  }
  if (!is_pow2(a) || a > (uint64_t{1} << 30))
    return fail(value_offset, fmt::format("general.alignment {} is not a power of two in [1, 2^30]",
                                          v.to_string()));
  f_.alignment_ = static_cast<size_t>(a);
  return {};
}

Status GgufParser::read_tensor_info(uint64_t index, size_t& info_offset) {
  context_ = fmt::format("tensor info {}", index);
  info_offset = pos_;
  GgufTensorInfo t;
  TG_TRY(read_string(t.name, "tensor name"));
  if (f_.tensor_index_.find(t.name) != f_.tensor_index_.end())
    return fail(info_offset, fmt::format("duplicate tensor name '{}'", t.name));
  context_ = fmt::format("tensor '{}'", t.name);

  const size_t dims_at = pos_;
  uint32_t n_dims = 0;
  TG_TRY(read_raw(n_dims, "n_dims"));
  if (n_dims > kMaxDims)
    return fail(dims_at, fmt::format("n_dims {} exceeds the maximum {}", n_dims, kMaxDims));
  t.n_dims = static_cast<int>(n_dims);

  int64_t n_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const size_t ne_at = pos_;
    uint64_t ne = 0;
    TG_TRY(read_raw(ne, "dimension"));
    if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return fail(ne_at, fmt::format("dimension {} is {} (negative or too large)", d,
                                     static_cast<int64_t>(ne)));
    t.ne[d] = static_cast<int64_t>(ne);
    if (t.ne[d] != 0 && n_elements > std::numeric_limits<int64_t>::max() / t.ne[d])
      return fail(ne_at,
                  fmt::format("element count overflows at dimension {} (ne = {})", d, t.ne[d]));
    n_elements *= t.ne[d];
  }

  const size_t type_at = pos_;
  uint32_t type_id = 0;
  TG_TRY(read_raw(type_id, "ggml type"));
  const auto info = ggml_type_info(type_id);
  if (!info) {
    return fail(type_at, fmt::format("unsupported ggml type id {} ({}) for tensor '{}'", type_id,
                                     ggml_foreign_type_name(type_id), t.name));
  }
  t.type = info->type;
  if (t.ne[0] % info->block_elems != 0) {
    return fail(type_at, fmt::format("ne[0] = {} is not a multiple of the {} block size {}",
                                     t.ne[0], info->name, info->block_elems));
  }
  // nbytes = blocks per row * block bytes * rows; n_elements fits in int64, but the byte count
  // of a huge tensor can still overflow.
  const auto blocks = static_cast<uint64_t>(n_elements / info->block_elems);
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(info->block_bytes), &nbytes) ||
      nbytes > SIZE_MAX)
    return fail(type_at,
                fmt::format("byte size of {} elements of {} overflows", n_elements, info->name));
  t.nbytes = static_cast<size_t>(nbytes);

  const size_t offset_at = pos_;
  TG_TRY(read_raw(t.offset, "tensor data offset"));
  if (t.offset % f_.alignment_ != 0) {
    return fail(offset_at, fmt::format("data offset {} is not a multiple of the alignment {}",
                                       t.offset, f_.alignment_));
  }
  f_.tensor_index_.emplace(t.name, f_.tensors_.size());
  f_.tensors_.push_back(std::move(t));
  return {};
}

Status GgufParser::check_tensor_data(const GgufTensorInfo& t, size_t info_offset) const {
  const size_t data_size = file_size() - f_.data_offset_;
  if (t.offset > data_size || t.nbytes > data_size - t.offset) {
    return make_error(
        "{}: offset {}: tensor '{}': data at offset {} + {} bytes extends past the end of the file "
        "(data section starts at {}, file size {})",
        f_.path_, info_offset, t.name, t.offset, t.nbytes, f_.data_offset_, file_size());
  }
  return {};
}

}  // namespace tangram
