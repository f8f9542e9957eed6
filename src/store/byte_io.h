// Little-endian fixed-width fields in a byte buffer: a writer into a buffer sized in advance and
// a bounds-checked reader whose every failure names the byte where the data ran out. Used by the
// session codec; the host is little-endian (x86-64), so fields are copied as they are.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "common/result.h"

namespace tangram {

static_assert(std::endian::native == std::endian::little, "the session format is little-endian");

// Writes into out[0, capacity); the caller sized the buffer exactly, so writes never overrun.
class ByteWriter {
 public:
  explicit ByteWriter(char* out) : out_(out) {}
  template <typename T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::memcpy(out_ + pos_, &v, sizeof(T));
    pos_ += sizeof(T);
  }
  void bytes(const void* p, size_t n) {
    if (n > 0) std::memcpy(out_ + pos_, p, n);
    pos_ += n;
  }
  // The next n bytes, for a caller to fill in place.
  char* skip(size_t n) {
    char* p = out_ + pos_;
    pos_ += n;
    return p;
  }
  size_t pos() const { return pos_; }
  const char* at(size_t offset) const { return out_ + offset; }

 private:
  char* out_;
  size_t pos_ = 0;
};

// Reads from a view; `base` is the view's offset in the whole blob, so errors give absolute
// byte numbers. After a failed read the reader is unchanged.
class ByteReader {
 public:
  ByteReader(std::string_view data, size_t base = 0, size_t blob_size = 0)
      : data_(data), base_(base), blob_size_(blob_size == 0 ? base + data.size() : blob_size) {}

  size_t pos() const { return pos_; }             // within the view
  size_t offset() const { return base_ + pos_; }  // within the blob
  size_t remaining() const { return data_.size() - pos_; }

  // Error unless n more bytes are there; `what` names the field for the message.
  Status need(size_t n, std::string_view what) const {
    if (n <= remaining()) return Status::Ok();
    if (base_ + data_.size() == blob_size_)
      return make_error("session truncated at byte {}: {} needs {} bytes from byte {}", blob_size_,
                        what, n, offset());
    return make_error("{} needs {} bytes from byte {}, its block ends at byte {}", what, n,
                      offset(), base_ + data_.size());
  }
  template <typename T>
  Status get(T& v, std::string_view what) {
    static_assert(std::is_trivially_copyable_v<T>);
    TG_TRY(need(sizeof(T), what));
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }
  // The next n bytes as a view (no copy).
  Result<std::string_view> take(size_t n, std::string_view what) {
    TG_TRY(need(n, what));
    const std::string_view v = data_.substr(pos_, n);
    pos_ += n;
    return v;
  }

 private:
  std::string_view data_;
  size_t base_;
  size_t blob_size_;
  size_t pos_ = 0;
};

}  // namespace tangram
