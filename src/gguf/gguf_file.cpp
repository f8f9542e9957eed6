// GgufFile: holds the file (a read-only memory map or a copy in huge pages) and answers
// metadata/tensor look-ups.
#include "gguf/gguf_file.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <new>
#include <sstream>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "common/huge_pages.h"
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

// MemAvailable from /proc/meminfo (free memory plus what the kernel can reclaim, page cache
// included), or nullopt where it cannot be read.
std::optional<size_t> available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    size_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  return std::nullopt;
}

}  // namespace

FileMemory file_memory_for(FileMemory wanted, size_t file_bytes,
                           std::optional<size_t> available_bytes) {
  if (wanted == FileMemory::kHugePages && available_bytes && file_bytes > *available_bytes)
    return FileMemory::kMapped;
  return wanted;
}

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path, FileMemory memory,
                                                 const LoadProgress& progress) {
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
  if (memory == FileMemory::kHugePages) {
    const std::optional<size_t> available = available_memory_bytes();
    memory = file_memory_for(memory, size, available);
    if (memory == FileMemory::kMapped)
      fmt::print(
          stderr,
          "note: {}: {} MiB do not fit in the {} MiB of available memory for a huge-page copy; "
          "using the file's memory map instead (slower decode; --mmap chooses it without this "
          "note)\n",
          path, size >> 20, *available >> 20);
  }
  file->memory_ = memory;
  const Status loaded = memory == FileMemory::kHugePages
                            ? file->copy_into_huge_pages(fd, size, progress)
                            : file->map_file(fd, size);
  ::close(fd);  // a mapping keeps the file alive; a copy no longer needs it
  TG_TRY(loaded);
  TG_TRY(parse_guarded(*file, path));
  return file;
}

Status GgufFile::map_file(int fd, size_t size) {
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED)
    return make_error("{}: cannot mmap {} bytes: {}", path_, size, std::strerror(errno));
  mapping_ = map;
  mapping_bytes_ = size;
  base_ = static_cast<const uint8_t*>(map);
  size_ = size;
  return Status::Ok();
}

Status GgufFile::copy_into_huge_pages(int fd, size_t size, const LoadProgress& progress) {
  // Over-allocate by one huge page so the copy can start on a 2 MiB boundary, where the kernel
  // can back it with huge pages from the first byte.
  const size_t bytes = round_up_to(size, kHugePageBytes) + kHugePageBytes;
  void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED)
    return make_error("{}: cannot allocate {} MiB for the weights: {}", path_, bytes >> 20,
                      std::strerror(errno));
  mapping_ = map;
  mapping_bytes_ = bytes;
  auto* dst =
      reinterpret_cast<uint8_t*>(round_up_to(reinterpret_cast<uintptr_t>(map), kHugePageBytes));
  const size_t copy_bytes = round_up_to(size, kHugePageBytes);
#if defined(MADV_HUGEPAGE)
  (void)::madvise(dst, copy_bytes, MADV_HUGEPAGE);  // only a hint: 4 KiB pages still work
#endif
  // Chunks of 64 MiB: few system calls, and progress a slow disk can show.
  constexpr size_t kChunk = size_t{64} << 20;
  for (size_t done = 0; done < size;) {
    const ssize_t got =
        ::pread(fd, dst + done, std::min(kChunk, size - done), static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0)
      return make_error("{}: read failed at offset {}: {}", path_, done, std::strerror(errno));
    if (got == 0)
      return make_error("{}: file ended at offset {} of {} while reading", path_, done, size);
    done += static_cast<size_t>(got);
    if (progress) progress(done, size);
  }
  // The weights are read-only from here on, as through the mapping.
  (void)::mprotect(dst, copy_bytes, PROT_READ);
  huge_copy_ = dst;
  base_ = dst;
  size_ = size;
  return Status::Ok();
}

Result<std::unique_ptr<GgufFile>> GgufFile::open_memory(std::string name, const void* data,
                                                        size_t size) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = std::move(name);
  if (size == 0 || data == nullptr)
    return make_error("{}: offset 0: file is empty (not a GGUF file)", file->path_);
  file->owned_.reset(new (std::align_val_t{kOwnedAlign}, std::nothrow) uint8_t[size]);
  if (!file->owned_) return make_error("{}: out of memory copying {} bytes", file->path_, size);
  std::memcpy(file->owned_.get(), data, size);
  file->base_ = file->owned_.get();
  file->size_ = size;
  TG_TRY(parse_guarded(*file, file->path_));
  return file;
}

GgufFile::~GgufFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_bytes_);
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
  if (!gguf_type_is_signed(e) && !gguf_type_is_unsigned(e) && e != GgufValueType::BOOL)
    return nullptr;
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
  v.layout = t.layout;
  return v;
}

TensorView GgufFile::view(std::string_view name) const {
  const GgufTensorInfo* t = find_tensor(name);
  return t == nullptr ? TensorView{} : view(*t);
}

Status GgufFile::rewrite_tensors(std::span<const std::string> names, const TensorRewrite& rewrite) {
  if (memory_ != FileMemory::kHugePages || huge_copy_ == nullptr)
    return make_error("{}: tensors can be rewritten only in a huge-page copy of the file", path_);
  std::vector<GgufTensorInfo*> targets;
  for (const std::string& name : names) {
    const auto it = tensor_index_.find(name);
    if (it == tensor_index_.end()) return make_error("{}: no tensor '{}' to rewrite", path_, name);
    targets.push_back(&tensors_[it->second]);
  }
  // The whole copy at once, as copy_into_huge_pages protected it: a part would split the
  // mapping (and its huge pages) in two.
  uint8_t* copy = huge_copy_;
  const size_t copy_bytes = round_up_to(size_, kHugePageBytes);
  if (::mprotect(copy, copy_bytes, PROT_READ | PROT_WRITE) != 0)
    return make_error("{}: cannot make the weights writable: {}", path_, std::strerror(errno));
  for (GgufTensorInfo* t : targets) {
    if (t->layout != TensorLayout::kRowMajor) continue;
    t->layout = rewrite(view(*t), copy + data_offset_ + t->offset);
  }
  (void)::mprotect(copy, copy_bytes, PROT_READ);
  return Status::Ok();
}

}  // namespace tangram
