// Helpers for the GGUF tests: a hand-rolled byte builder (for files the writer cannot or must
// not produce: v2, nested arrays, corrupt fields) and error-message checks.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "gguf/gguf_file.h"

namespace tangram::testing {

// Appends little-endian GGUF encodings to a byte string.
class RawGguf {
 public:
  template <typename T>
  RawGguf& put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    bytes.append(b, sizeof(T));
    return *this;
  }
  RawGguf& u32(uint32_t v) { return put(v); }
  RawGguf& u64(uint64_t v) { return put(v); }
  RawGguf& str(std::string_view s) {
    u64(s.size());
    bytes.append(s);
    return *this;
  }
  // "GGUF" | version | n_tensors | n_kv
  RawGguf& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    bytes.append("GGUF");
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  RawGguf& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(4).u32(v); }
  RawGguf& kv_str(std::string_view key, std::string_view v) { return str(key).u32(8).str(v); }
  RawGguf& tensor(std::string_view name, std::initializer_list<uint64_t> ne, uint32_t type,
                  uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (const uint64_t n : ne) u64(n);
    return u32(type).u64(offset);
  }
  RawGguf& pad(size_t alignment) {
    bytes.resize((bytes.size() + alignment - 1) / alignment * alignment, '\0');
    return *this;
  }
  RawGguf& zeros(size_t n) {
    bytes.append(n, '\0');
    return *this;
  }

  std::string bytes;
};

// Replaces p with `bytes`. Removing first (rather than truncating) avoids the flush some file
// systems force when a file is truncated and rewritten, which made the loops slow.
inline void write_bytes(const std::filesystem::path& p, std::string_view bytes) {
  std::filesystem::remove(p);
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The parser's error shape: "<path>: offset <N>: <problem>", with N inside the file. Returns
// N, or -1 (after recording a failure) when the message does not have that shape.
inline int64_t expect_located_error(const std::string& message, const std::string& path,
                                    size_t file_size) {
  const std::string prefix = path + ": offset ";
  if (message.rfind(prefix, 0) != 0) {
    ADD_FAILURE() << "error does not start with '" << prefix << "': " << message;
    return -1;
  }
  size_t used = 0;
  int64_t off = -1;
  try {
    off = std::stoll(message.substr(prefix.size()), &used);
  } catch (...) {
    ADD_FAILURE() << "no offset in: " << message;
    return -1;
  }
  EXPECT_GE(off, 0) << message;
  EXPECT_LE(static_cast<size_t>(off), file_size) << message;
  EXPECT_EQ(message.substr(prefix.size() + used, 2), ": ") << message;
  EXPECT_GT(message.size(), prefix.size() + used + 2) << "no problem described: " << message;
  return off;
}

}  // namespace tangram::testing
