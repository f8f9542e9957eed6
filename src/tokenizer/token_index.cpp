#include "tokenizer/token_index.h"

#include <functional>

namespace tangram {

uint64_t TokenIndex::hash(std::string_view text) { return std::hash<std::string_view>{}(text); }

TokenIndex::TokenIndex(const std::vector<std::string>& texts) : texts_(&texts) {
  // Load factor at most 1/2 keeps probe sequences short.
  size_t capacity = 16;
  while (capacity < texts.size() * 2) capacity *= 2;
  mask_ = capacity - 1;
  slots_.assign(capacity, -1);
  tags_.assign(capacity, 0);
  for (size_t id = 0; id < texts.size(); ++id) {
    const uint64_t h = hash(texts[id]);
    const auto tag = static_cast<uint32_t>(h >> 32);
    for (uint64_t slot = h & mask_;; slot = (slot + 1) & mask_) {
      const int32_t occupant = slots_[slot];
      if (occupant < 0) {
        slots_[slot] = static_cast<int32_t>(id);
        tags_[slot] = tag;
        break;
      }
      if (tags_[slot] == tag && texts[static_cast<size_t>(occupant)] == texts[id])
        break;  // duplicate
    }
  }
}

int32_t TokenIndex::find(std::string_view text) const {
  if (texts_ == nullptr) return -1;
  const uint64_t h = hash(text);
  const auto tag = static_cast<uint32_t>(h >> 32);
  for (uint64_t slot = h & mask_;; slot = (slot + 1) & mask_) {
    const int32_t id = slots_[slot];
    if (id < 0) return -1;
    if (tags_[slot] == tag && (*texts_)[static_cast<size_t>(id)] == text) return id;
  }
}

}  // namespace tangram
