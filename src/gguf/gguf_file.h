// GGUF reader (format versions 2 and 3): memory-maps the file (or copies it into huge pages),
// parses the metadata and tensor directory, and hands out TensorViews into those bytes. Every
// read is bounds-checked; a truncated, corrupt or unsupported file gives one Error naming the
// file, the byte offset and the problem.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "gguf/tensor_view.h"

namespace tangram {

// GGUF metadata value types (gguf_type), numbered as on disk.
enum class GgufValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
std::string_view gguf_value_type_name(GgufValueType t);
bool gguf_type_is_unsigned(GgufValueType t);  // UINT8/16/32/64
bool gguf_type_is_signed(GgufValueType t);    // INT8/16/32/64
bool gguf_type_is_float(GgufValueType t);     // FLOAT32/64

// One metadata value. Scalars use the field for their class (integers in `i` or `u`, floats in
// `f`, bool in `b`, strings in `s`); arrays set `elem_type` and fill exactly one of `strings`,
// `ints` (all integer and bool element types) or `floats`.
// The reader fills both `i` and `u` for integer and bool scalars (u64 values above INT64_MAX
// wrap in `i`); the writer takes unsigned types from `u`, signed ones from `i`. u64 array
// elements are kept as their bit pattern in `ints`. Arrays of arrays (elem_type ARRAY) are
// kept read-only: each inner array rendered with to_string() in `strings`.
struct GgufValue {
  GgufValueType type = GgufValueType::UINT32;
  GgufValueType elem_type = GgufValueType::UINT32;  // arrays only
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  bool b = false;
  std::string s;
  std::vector<std::string> strings;
  std::vector<int64_t> ints;
  std::vector<double> floats;

  bool is_array() const { return type == GgufValueType::ARRAY; }
  size_t array_size() const { return strings.size() + ints.size() + floats.size(); }
  // Human-readable rendering (arrays abbreviated after `max_items`).
  std::string to_string(size_t max_items = 8) const;
};

struct GgufKV {
  std::string key;
  GgufValue value;
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  int n_dims = 0;
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  uint64_t offset = 0;  // relative to the start of the data section
  size_t nbytes = 0;
  TensorLayout layout =
      TensorLayout::kRowMajor;  // as in the file unless rewrite_tensors changed it
};

// Where GgufFile::open keeps the file's bytes.
enum class FileMemory {
  // A read-only memory map: nothing is copied, pages come from the page cache 4 KiB at a time.
  kMapped,
  // A copy in anonymous memory, 2 MiB aligned and advised into transparent huge pages (where
  // the kernel allows them: `madvise` or `always` in /sys/kernel/mm/transparent_hugepage).
  // Decode streams every weight once per step; on 4 KiB pages that is a TLB miss and a stop of
  // the hardware prefetcher every 4 KiB (docs/benchmarks.md measures the difference). Needs the
  // file's size in available memory (open() maps the file instead where it does not fit),
  // and reading it takes a moment.
  kHugePages,
};

// How open() holds a file of `file_bytes` when `wanted` was asked for: a huge-page copy only
// where it fits in `available_bytes` (MemAvailable; unknown counts as fitting), else the map:
// a model that fits on disk but not twice in memory still loads, only decodes slower.
FileMemory file_memory_for(FileMemory wanted, size_t file_bytes,
                           std::optional<size_t> available_bytes);

// Bytes copied so far of the total, called after each chunk of a kHugePages open (so a caller
// can show progress on a slow disk).
using LoadProgress = std::function<void(size_t done, size_t total)>;

// Rewrites one tensor in place: gets its (row-major) view and its writable bytes, returns the
// layout the bytes have afterwards (kRowMajor where it left them alone).
using TensorRewrite = std::function<TensorLayout(const TensorView& view, uint8_t* bytes)>;

class GgufFile {
 public:
  // Opens and validates `path`, mapped or copied (FileMemory). The bytes live as long as the
  // GgufFile.
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path,
                                                FileMemory memory = FileMemory::kMapped,
                                                const LoadProgress& progress = {});
  // Parses a private copy of an in-memory GGUF image of `size` bytes; `name` stands in for the
  // path in messages. Used for generated files and by tests (a heap copy of exactly `size`
  // bytes lets AddressSanitizer catch any over-read, which an mmap would hide).
  static Result<std::unique_ptr<GgufFile>> open_memory(std::string name, const void* data,
                                                       size_t size);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  size_t file_size() const { return size_; }
  // How the bytes are held: what open() was asked for, unless a copy did not fit (kMapped).
  FileMemory memory() const { return memory_; }
  size_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }

  // Metadata in file order.
  const std::vector<GgufKV>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;
  // Typed getters: nullopt when the key is absent or of an incompatible type. get_int accepts
  // every integer type (and bool); get_float accepts floats and integers.
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  const std::vector<std::string>* get_string_array(std::string_view key) const;
  const std::vector<int64_t>* get_int_array(std::string_view key) const;
  const std::vector<double>* get_float_array(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  TensorView view(const GgufTensorInfo& t) const;
  // View of a named tensor, or an empty view if absent.
  TensorView view(std::string_view name) const;
  // Rewrites the named row-major tensors of a huge-page copy in place (the copy is writable for
  // the call only) and records each one's new layout in its GgufTensorInfo and later views.
  // Error (nothing rewritten) on a file not held as a huge-page copy or an unknown name; a
  // tensor already rewritten is left alone.
  Status rewrite_tensors(std::span<const std::string> names, const TensorRewrite& rewrite);

 private:
  GgufFile() = default;
  friend class GgufParser;
  // open()'s two ways to hold the `size` bytes of the open file `fd`.
  Status map_file(int fd, size_t size);
  Status copy_into_huge_pages(int fd, size_t size, const LoadProgress& progress);

  // Lets the maps be searched with a string_view without building a std::string.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using NameIndex = std::unordered_map<std::string, size_t, NameHash, std::equal_to<>>;

  std::string path_;
  uint32_t version_ = 0;
  const uint8_t* base_ =
      nullptr;  // [size_] the whole file: a read-only mapping, a huge-page copy or owned_
  size_t size_ = 0;
  // The mapping base_ lies in (the file's, or the anonymous one holding the copy), unmapped by
  // the destructor; null for open_memory's copy.
  void* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  uint8_t* huge_copy_ = nullptr;  // base_ of a huge-page copy (read-only except in rewrite_tensors)
  FileMemory memory_ = FileMemory::kMapped;
  // open_memory's copy is 64-byte aligned, like a mapping's start, so tensor data keeps the
  // file's alignment (up to 64) in memory.
  static constexpr size_t kOwnedAlign = 64;
  struct AlignedFree {
    void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t{kOwnedAlign}); }
  };
  std::unique_ptr<uint8_t[], AlignedFree> owned_;  // [size_] copy made by open_memory
  size_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::vector<GgufKV> kv_;
  NameIndex kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  NameIndex tensor_index_;
};

// Builds a GGUF v3 file in memory order: metadata first, then tensors, each aligned.
class GgufWriter {
 public:
  void set_string(const std::string& key, const std::string& v);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  // Generic setter (used to copy metadata from another file).
  void set_value(const std::string& key, const GgufValue& v);
  void set_alignment(uint32_t alignment);

  // `data` must hold ggml_row_bytes(type, ne[0]) * rows bytes; it is copied.
  Status add_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& ne,
                    const void* data, size_t nbytes);

  // Writes atomically (temporary file, then rename).
  Status write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
  };
  std::vector<GgufKV> kv_;
  std::vector<Tensor> tensors_;
  uint32_t alignment_ = 32;
  void put(const std::string& key, GgufValue v);
};

}  // namespace tangram
