// GgufFile: owns the read-only memory mapping and answers metadata/tensor look-ups.
#include "gguf/gguf_file.h"

#include <cerrno>
#include <cstring>
#include <limits>
#include <new>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf_parser.h"

namespace tangram {
namespace {

// The parser bounds every allocation by the file size, but a large corrupt file can still ask
// for more memory than the machine has; that must come back as an Error, not an exception.
Status parse_guarded(GgufFile& file, const std::string& path) {
  try {
    return GgufParser::parse(file);
  } catch (const std::bad_alloc&) {
    return make_error("{}: out of memory while reading the metadata", path);
  }
}

}  // namespace

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = path;

  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return make_error("{}: cannot stat: {}", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error("{}: not a regular file", path);
  }
  if (st.st_size == 0) {
    ::close(fd);
    return make_error("{}: offset 0: file is empty (not a GGUF file)", path);
  }
  const auto size = static_cast<size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (map == MAP_FAILED) return make_error("{}: cannot mmap {} bytes: {}", path, size, std::strerror(map_err));
  file->base_ = static_cast<const uint8_t*>(map);
  file->size_ = size;
  file->mapped_ = true;

  TG_TRY(parse_guarded(*file, path));
  return file;
}

Result<std::unique_ptr<GgufFile>> GgufFile::open_memory(std::string name, const void* data, size_t size) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = std::move(name);
  if (size == 0 || data == nullptr) return make_error("{}: offset 0: file is empty (not a GGUF file)", file->path_);
  file->owned_.reset(new (std::align_val_t{kOwnedAlign}, std::nothrow) uint8_t[size]);
  if (!file->owned_) return make_error("{}: out of memory copying {} bytes", file->path_, size);
  std::memcpy(file->owned_.get(), data, size);
  file->base_ = file->owned_.get();
  file->size_ = size;
  TG_TRY(parse_guarded(*file, file->path_));
  return file;
}

GgufFile::~GgufFile() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(base_), size_);
}

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].value;
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->type != GgufValueType::STRING) return std::nullopt;
  return v->s;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (gguf_type_is_signed(v->type)) return v->i;
  if (v->type == GgufValueType::BOOL) return v->b ? 1 : 0;
  if (gguf_type_is_unsigned(v->type)) {
    if (v->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(v->u);
  }
  return std::nullopt;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (gguf_type_is_float(v->type)) return v->f;
  if (gguf_type_is_signed(v->type)) return static_cast<double>(v->i);
  if (gguf_type_is_unsigned(v->type)) return static_cast<double>(v->u);
  return std::nullopt;
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->type != GgufValueType::BOOL) return std::nullopt;
  return v->b;
}

const std::vector<std::string>* GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || !v->is_array() || v->elem_type != GgufValueType::STRING) return nullptr;
  return &v->strings;
}

const std::vector<int64_t>* GgufFile::get_int_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || !v->is_array()) return nullptr;
  const GgufValueType e = v->elem_type;
  if (!gguf_type_is_signed(e) && !gguf_type_is_unsigned(e) && e != GgufValueType::BOOL) return nullptr;
  return &v->ints;
}

const std::vector<double>* GgufFile::get_float_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || !v->is_array() || !gguf_type_is_float(v->elem_type)) return nullptr;
  return &v->floats;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

TensorView GgufFile::view(const GgufTensorInfo& t) const {
  TensorView v;
  v.name = t.name;
  v.type = t.type;
  v.ne = t.ne;
  v.n_dims = t.n_dims;
  // The parser checked data_offset_ + offset + nbytes <= size_.
  v.data = base_ + data_offset_ + t.offset;
  v.nbytes = t.nbytes;
  return v;
}

TensorView GgufFile::view(std::string_view name) const {
  const GgufTensorInfo* t = find_tensor(name);
  return t == nullptr ? TensorView{} : view(*t);
}

}  // namespace tangram
