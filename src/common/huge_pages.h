// Memory the kernel may back with 2 MiB pages: the KV arena, the bandwidth probes' buffers and
// the weights' copy read at random or in long runs, where a 4 KiB page per TLB entry would
// cost a page walk every few kilobytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "common/result.h"

namespace tangram {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// x rounded up to a multiple of `to` (> 0).
constexpr size_t round_up_to(size_t x, size_t to) { return (x + to - 1) / to * to; }

struct HugePageFree {
  void operator()(uint8_t* p) const;
};
using HugePageBuffer = std::unique_ptr<uint8_t[], HugePageFree>;

// At least `bytes` (rounded up to whole huge pages), 2 MiB aligned and, on Linux, advised for
// transparent huge pages (only a hint: with 4 KiB pages the memory works the same). Not
// touched: the kernel backs it as it is first written. Errors when the memory is not there.
Result<HugePageBuffer> allocate_huge_page_buffer(size_t bytes, std::string_view what);

}  // namespace tangram
