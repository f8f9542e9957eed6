// Text -> id lookup over a list of token texts: an open-addressing hash table of ids that
// points back into the (caller-owned) texts, so building it copies no strings. Lookups take a
// string_view and allocate nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tangram {

class TokenIndex {
 public:
  TokenIndex() = default;
  // `texts` must outlive the index and not change. For duplicate texts the lowest id wins.
  explicit TokenIndex(const std::vector<std::string>& texts);

  // The id of `text`, or -1.
  int32_t find(std::string_view text) const;

 private:
  static uint64_t hash(std::string_view text);

  const std::vector<std::string>* texts_ = nullptr;
  std::vector<int32_t> slots_;  // [capacity] token id, or -1 for an empty slot
  std::vector<uint32_t> tags_;  // [capacity] high hash bits of the slot's text, to skip compares
  uint64_t mask_ = 0;           // capacity - 1 (capacity is a power of two)
};

}  // namespace tangram
