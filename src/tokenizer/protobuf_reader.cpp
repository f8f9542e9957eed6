#include "tokenizer/protobuf_reader.h"

namespace tangram {

Result<uint64_t> ProtoReader::read_varint() {
  uint64_t value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos_ >= data_.size()) return make_error("protobuf: varint truncated at byte {}", pos_);
    const auto b = static_cast<uint8_t>(data_[pos_++]);
    value |= static_cast<uint64_t>(b & 0x7F) << shift;
    if ((b & 0x80) == 0) return value;
  }
  return make_error("protobuf: varint longer than 10 bytes at byte {}", pos_);
}

Result<ProtoField> ProtoReader::next() {
  const size_t start = pos_;
  TG_ASSIGN(const uint64_t key, read_varint());
  ProtoField f;
  f.number = static_cast<uint32_t>(key >> 3);
  const auto wire = static_cast<uint32_t>(key & 7);
  if (f.number == 0) return make_error("protobuf: field number 0 at byte {}", start);
  const auto take_fixed = [&](size_t n) -> Status {
    if (data_.size() - pos_ < n)
      return make_error("protobuf: fixed field truncated at byte {}", pos_);
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i)
      v |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_ + i])) << (8 * i);
    f.varint = v;
    pos_ += n;
    return {};
  };
  switch (wire) {
    case 0: {
      f.wire = WireType::kVarint;
      TG_ASSIGN(f.varint, read_varint());
      break;
    }
    case 1:
      f.wire = WireType::kFixed64;
      TG_TRY(take_fixed(8));
      break;
    case 2: {
      f.wire = WireType::kLengthDelimited;
      TG_ASSIGN(const uint64_t len, read_varint());
      if (len > data_.size() - pos_) {
        return make_error("protobuf: field {} of {} bytes overruns the buffer at byte {}", f.number,
                          len, pos_);
      }
      f.bytes = data_.substr(pos_, static_cast<size_t>(len));
      pos_ += static_cast<size_t>(len);
      break;
    }
    case 5:
      f.wire = WireType::kFixed32;
      TG_TRY(take_fixed(4));
      break;
    default:
      return make_error("protobuf: unsupported wire type {} at byte {}", wire, start);
  }
  return f;
}

}  // namespace tangram
