// GgufWriter: serialises metadata and tensors as GGUF v3 and replaces the target atomically
// (write a temporary file beside it, fsync, rename).
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "gguf/gguf_file.h"

namespace tangram {
namespace {

constexpr uint32_t kWriteVersion = 3;
constexpr std::string_view kAlignmentKey = "general.alignment";

// Little-endian byte sink for the header (the host is little-endian; see gguf_parser.cpp).
class ByteSink {
 public:
  template <typename T>
  void put(T v) {
    const size_t at = buf_.size();
    buf_.resize(at + sizeof(T));
    std::memcpy(buf_.data() + at, &v, sizeof(T));
  }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    buf_.insert(buf_.end(), s.begin(), s.end());
  }
  void pad_to(size_t alignment) {
    buf_.resize((buf_.size() + alignment - 1) / alignment * alignment, 0);
  }
  const std::vector<uint8_t>& bytes() const { return buf_; }

 private:
  std::vector<uint8_t> buf_;
};

bool fits(GgufValueType t, int64_t v) {
  switch (t) {
    case GgufValueType::UINT8:
      return v >= 0 && v <= std::numeric_limits<uint8_t>::max();
    case GgufValueType::INT8:
      return v >= std::numeric_limits<int8_t>::min() && v <= std::numeric_limits<int8_t>::max();
    case GgufValueType::UINT16:
      return v >= 0 && v <= std::numeric_limits<uint16_t>::max();
    case GgufValueType::INT16:
      return v >= std::numeric_limits<int16_t>::min() && v <= std::numeric_limits<int16_t>::max();
    case GgufValueType::UINT32:
      return v >= 0 && v <= std::numeric_limits<uint32_t>::max();
    case GgufValueType::INT32:
      return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
    case GgufValueType::BOOL:
      return v == 0 || v == 1;
    default:
      return true;  // 64-bit types keep the bit pattern
  }
}

// Appends an integer of type t (already range-checked) in its on-disk width.
void put_int(ByteSink& out, GgufValueType t, int64_t v) {
  switch (t) {
    case GgufValueType::UINT8:
    case GgufValueType::BOOL:
      out.put(static_cast<uint8_t>(v));
      break;
    case GgufValueType::INT8:
      out.put(static_cast<int8_t>(v));
      break;
    case GgufValueType::UINT16:
      out.put(static_cast<uint16_t>(v));
      break;
    case GgufValueType::INT16:
      out.put(static_cast<int16_t>(v));
      break;
    case GgufValueType::UINT32:
      out.put(static_cast<uint32_t>(v));
      break;
    case GgufValueType::INT32:
      out.put(static_cast<int32_t>(v));
      break;
    case GgufValueType::UINT64:
      out.put(static_cast<uint64_t>(v));
      break;
    default:
      out.put(v);
      break;
  }
}

void put_float(ByteSink& out, GgufValueType t, double v) {
  if (t == GgufValueType::FLOAT32) {
    out.put(static_cast<float>(v));
  } else {
    out.put(v);
  }
}

Status encode_value(ByteSink& out, const std::string& key, const GgufValue& v) {
  const auto type = static_cast<uint32_t>(v.type);
  if (type > static_cast<uint32_t>(GgufValueType::FLOAT64))
    return make_error("metadata key '{}': invalid value type {}", key, type);
  out.put(type);
  if (v.type == GgufValueType::STRING) {
    out.put_string(v.s);
    return {};
  }
  if (v.type == GgufValueType::BOOL) {
    out.put<uint8_t>(v.b ? 1 : 0);
    return {};
  }
  if (gguf_type_is_float(v.type)) {
    put_float(out, v.type, v.f);
    return {};
  }
  if (gguf_type_is_unsigned(v.type)) {
    if (v.type != GgufValueType::UINT64 &&
        (v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
         !fits(v.type, static_cast<int64_t>(v.u))))
      return make_error("metadata key '{}': value {} does not fit in {}", key, v.u,
                        gguf_value_type_name(v.type));
    put_int(out, v.type, static_cast<int64_t>(v.u));
    return {};
  }
  if (gguf_type_is_signed(v.type)) {
    if (!fits(v.type, v.i))
      return make_error("metadata key '{}': value {} does not fit in {}", key, v.i,
                        gguf_value_type_name(v.type));
    put_int(out, v.type, v.i);
    return {};
  }

  // Arrays: exactly the vector selected by elem_type holds the items.
  const GgufValueType e = v.elem_type;
  if (e == GgufValueType::ARRAY)
    return make_error("metadata key '{}': arrays of arrays cannot be written", key);
  if (static_cast<uint32_t>(e) > static_cast<uint32_t>(GgufValueType::FLOAT64))
    return make_error("metadata key '{}': invalid array element type {}", key,
                      static_cast<uint32_t>(e));
  const bool is_str = e == GgufValueType::STRING;
  const bool is_float = gguf_type_is_float(e);
  const bool is_int = !is_str && !is_float;
  if ((!is_str && !v.strings.empty()) || (!is_float && !v.floats.empty()) ||
      (!is_int && !v.ints.empty())) {
    return make_error("metadata key '{}': array of {} has items stored in the wrong vector", key,
                      gguf_value_type_name(e));
  }
  out.put(static_cast<uint32_t>(e));
  if (is_str) {
    out.put<uint64_t>(v.strings.size());
    for (const auto& s : v.strings) out.put_string(s);
  } else if (is_float) {
    out.put<uint64_t>(v.floats.size());
    for (const double x : v.floats) put_float(out, e, x);
  } else {
    out.put<uint64_t>(v.ints.size());
    for (size_t k = 0; k < v.ints.size(); ++k) {
      if (!fits(e, v.ints[k])) {
        return make_error("metadata key '{}': array item {} = {} does not fit in {}", key, k,
                          v.ints[k], gguf_value_type_name(e));
      }
      put_int(out, e, v.ints[k]);
    }
  }
  return {};
}

// Writes all of [data, data + n) to fd, retrying short writes and EINTR.
bool write_all(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, std::min<size_t>(n, size_t{1} << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Makes the rename durable; failures only weaken durability, so they are ignored.
void sync_parent_dir(const std::string& path) {
  auto dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

}  // namespace

void GgufWriter::put(const std::string& key, GgufValue v) {
  for (auto& kv : kv_) {
    if (kv.key == key) {
      kv.value = std::move(v);
      return;
    }
  }
  kv_.push_back(GgufKV{key, std::move(v)});
}

void GgufWriter::set_string(const std::string& key, const std::string& v) {
  GgufValue x;
  x.type = GgufValueType::STRING;
  x.s = v;
  put(key, std::move(x));
}

void GgufWriter::set_u32(const std::string& key, uint32_t v) {
  GgufValue x;
  x.type = GgufValueType::UINT32;
  x.u = v;
  x.i = v;
  put(key, std::move(x));
}

void GgufWriter::set_i32(const std::string& key, int32_t v) {
  GgufValue x;
  x.type = GgufValueType::INT32;
  x.i = v;
  x.u = static_cast<uint64_t>(x.i);
  put(key, std::move(x));
}

void GgufWriter::set_u64(const std::string& key, uint64_t v) {
  GgufValue x;
  x.type = GgufValueType::UINT64;
  x.u = v;
  x.i = static_cast<int64_t>(v);
  put(key, std::move(x));
}

void GgufWriter::set_f32(const std::string& key, float v) {
  GgufValue x;
  x.type = GgufValueType::FLOAT32;
  x.f = static_cast<double>(v);
  put(key, std::move(x));
}

void GgufWriter::set_bool(const std::string& key, bool v) {
  GgufValue x;
  x.type = GgufValueType::BOOL;
  x.b = v;
  x.i = v ? 1 : 0;
  x.u = v ? 1 : 0;
  put(key, std::move(x));
}

void GgufWriter::set_string_array(const std::string& key, const std::vector<std::string>& v) {
  GgufValue x;
  x.type = GgufValueType::ARRAY;
  x.elem_type = GgufValueType::STRING;
  x.strings = v;
  put(key, std::move(x));
}

void GgufWriter::set_i32_array(const std::string& key, const std::vector<int32_t>& v) {
  GgufValue x;
  x.type = GgufValueType::ARRAY;
  x.elem_type = GgufValueType::INT32;
  x.ints.assign(v.begin(), v.end());
  put(key, std::move(x));
}

void GgufWriter::set_f32_array(const std::string& key, const std::vector<float>& v) {
  GgufValue x;
  x.type = GgufValueType::ARRAY;
  x.elem_type = GgufValueType::FLOAT32;
  x.floats.reserve(v.size());
  for (const float f : v) x.floats.push_back(static_cast<double>(f));
  put(key, std::move(x));
}

void GgufWriter::set_value(const std::string& key, const GgufValue& v) { put(key, v); }

void GgufWriter::set_alignment(uint32_t alignment) {
  alignment_ = alignment;
  set_u32(std::string(kAlignmentKey), alignment);
}

Status GgufWriter::add_tensor(const std::string& name, GgmlType type,
                              const std::vector<int64_t>& ne, const void* data, size_t nbytes) {
  if (name.empty()) return make_error("add_tensor: empty tensor name");
  for (const auto& t : tensors_)
    if (t.name == name) return make_error("add_tensor '{}': duplicate tensor name", name);
  const auto info = ggml_type_info(static_cast<uint32_t>(type));
  if (!info)
    return make_error("add_tensor '{}': unsupported ggml type id {}", name,
                      static_cast<uint32_t>(type));
  if (ne.empty() || ne.size() > 4)
    return make_error("add_tensor '{}': {} dimensions (need 1 to 4)", name, ne.size());
  int64_t n_elements = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 0) return make_error("add_tensor '{}': ne[{}] = {} is negative", name, d, ne[d]);
    if (ne[d] != 0 && n_elements > std::numeric_limits<int64_t>::max() / ne[d])
      return make_error("add_tensor '{}': element count overflows", name);
    n_elements *= ne[d];
  }
  if (ne[0] % info->block_elems != 0) {
    return make_error("add_tensor '{}': ne[0] = {} is not a multiple of the {} block size {}", name,
                      ne[0], info->name, info->block_elems);
  }
  uint64_t expected = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(n_elements / info->block_elems),
                             static_cast<uint64_t>(info->block_bytes), &expected))
    return make_error("add_tensor '{}': byte size overflows", name);
  if (nbytes != expected)
    return make_error("add_tensor '{}': {} bytes given, {} {} elements need {}", name, nbytes,
                      n_elements, info->name, expected);
  if (nbytes > 0 && data == nullptr) return make_error("add_tensor '{}': null data", name);
  Tensor t{name, type, ne, {}};
  const auto* p = static_cast<const uint8_t*>(data);
  if (nbytes > 0) t.data.assign(p, p + nbytes);
  tensors_.push_back(std::move(t));
  return {};
}

Status GgufWriter::write(const std::string& path) const {
  // general.alignment set through any setter wins over the default.
  uint64_t alignment = alignment_;
  for (const auto& kv : kv_) {
    if (kv.key != kAlignmentKey) continue;
    const GgufValue& v = kv.value;
    if (gguf_type_is_unsigned(v.type)) {
      alignment = v.u;
    } else if (gguf_type_is_signed(v.type)) {
      alignment = v.i > 0 ? static_cast<uint64_t>(v.i) : 0;
    } else {
      return make_error("{}: general.alignment must be an integer, not {}", path,
                        gguf_value_type_name(v.type));
    }
  }
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > (uint64_t{1} << 30))
    return make_error("{}: alignment {} is not a power of two in [1, 2^30]", path, alignment);
  const auto align = static_cast<size_t>(alignment);

  ByteSink head;
  head.put<uint32_t>(0x46554747);  // "GGUF" read as little-endian u32
  head.put<uint32_t>(kWriteVersion);
  head.put<uint64_t>(tensors_.size());
  head.put<uint64_t>(kv_.size());
  for (const auto& kv : kv_) {
    head.put_string(kv.key);
    const Status s = encode_value(head, kv.key, kv.value);
    if (!s.ok()) return make_error("{}: {}", path, s.message());
  }
  uint64_t offset = 0;  // running data-section offset, each tensor padded to `align`
  for (const auto& t : tensors_) {
    head.put_string(t.name);
    head.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (const int64_t n : t.ne) head.put<uint64_t>(static_cast<uint64_t>(n));
    head.put<uint32_t>(static_cast<uint32_t>(t.type));
    head.put<uint64_t>(offset);
    offset += (t.data.size() + align - 1) / align * align;
  }
  head.pad_to(align);

  static std::atomic<unsigned> counter{0};
  const std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return make_error("{}: cannot create temporary file {}: {}", path, tmp, std::strerror(errno));
  auto fail = [&](std::string_view what) -> Status {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return make_error("{}: {} {}: {}", path, what, tmp, std::strerror(err));
  };

  if (!write_all(fd, head.bytes().data(), head.bytes().size())) return fail("cannot write");
  const std::vector<uint8_t> zeros(align, 0);
  for (const auto& t : tensors_) {
    if (!write_all(fd, t.data.data(), t.data.size())) return fail("cannot write");
    const size_t pad = (align - t.data.size() % align) % align;
    if (!write_all(fd, zeros.data(), pad)) return fail("cannot write");
  }
  if (::fsync(fd) != 0) return fail("cannot fsync");
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return make_error("{}: cannot close {}: {}", path, tmp, std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return make_error("{}: cannot rename {} into place: {}", path, tmp, std::strerror(err));
  }
  sync_parent_dir(path);
  return {};
}

}  // namespace tangram
