// Internal to the gguf module: parses a memory-mapped GGUF image into a GgufFile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"
#include "gguf/gguf_file.h"

namespace tangram {

// A bounds-checked cursor over file.base_[0, file.size_). Every failure is reported as
// "<path>: offset <byte>: <context>: <problem>", and parsing stops at the first one.
class GgufParser {
 public:
  // Fills file's version, metadata, alignment, tensor directory and data offset from the
  // mapping already stored in file.base_/file.size_.
  static Status parse(GgufFile& file);

 private:
  explicit GgufParser(GgufFile& file) : f_(file) {}

  Status run();
  Status read_header(uint64_t& n_tensors, uint64_t& n_kv);
  Status read_kv(uint64_t index);
  Status read_value(GgufValueType type, GgufValue& out, int depth);
  Status read_array(GgufValue& out, int depth);
  Status apply_alignment(const GgufValue& v, size_t value_offset);
  Status read_tensor_info(uint64_t index, size_t& info_offset);
  Status check_tensor_data(const GgufTensorInfo& t, size_t info_offset) const;

  Error fail(size_t offset, std::string_view problem) const;
  size_t remaining() const { return file_size() - pos_; }
  size_t file_size() const;
  // Copies sizeof(T) bytes (little-endian on disk, as on the host) or fails naming `what`.
  template <typename T>
  Status read_raw(T& out, std::string_view what);
  Status read_string(std::string& out, std::string_view what);
  Status read_type(GgufValueType& out, std::string_view what);

  GgufFile& f_;
  size_t pos_ = 0;
  std::string context_;  // what is being read, e.g. "metadata key 'general.name'"
};

}  // namespace tangram
