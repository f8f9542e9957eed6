// Minimal, bounds-checked reader for the protobuf wire format (varint, 32/64-bit and
// length-delimited fields); enough to walk a SentencePiece ModelProto without libprotobuf.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/result.h"

namespace tangram {

enum class WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

struct ProtoField {
  uint32_t number = 0;
  WireType wire = WireType::kVarint;
  uint64_t varint = 0;     // kVarint, kFixed64 (raw bits), kFixed32 (raw bits)
  std::string_view bytes;  // kLengthDelimited: the payload
};

class ProtoReader {
 public:
  explicit ProtoReader(std::string_view data) : data_(data) {}
  bool done() const { return pos_ >= data_.size(); }
  size_t offset() const { return pos_; }
  // Reads the next field; fails on truncation, groups and unknown wire types.
  Result<ProtoField> next();

 private:
  Result<uint64_t> read_varint();
  std::string_view data_;
  size_t pos_ = 0;
};

}  // namespace tangram
