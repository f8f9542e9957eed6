// Read-only description of where one KV head of one sequence keeps its entries and which token
// positions they hold. The attention kernels see only this, so paged and dense storage share
// every line of the kernel.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kv/block_pool.h"

namespace tangram {

struct KvHeadView {
  // Row addressing. A paged head keeps entry e in page pages[e / page_tokens], slot
  // s = e % page_tokens, run s / R of its column (R = run_tokens, 0 for one run of the whole
  // column): its key row at k_base + pages[e / page_tokens] * page_bytes + (s / R) * run_bytes +
  // (s % R) * k_row_bytes, its value row likewise from v_base. A dense head has pages == nullptr
  // and keeps entry e at k_base + e * k_row_bytes (values at v_base + e * v_row_bytes).
  const uint8_t* k_base = nullptr;
  const uint8_t* v_base = nullptr;
  const PageId* pages = nullptr;  // [ceil(length / page_tokens)] or nullptr (dense)
  int64_t page_tokens = 1;
  size_t page_bytes = 0;
  int64_t run_tokens = 0;  // R: slots per run, a divisor of page_tokens; 0: page_tokens
  size_t run_bytes = 0;    // bytes from one run's first key row to the next run's
  size_t k_row_bytes = 0;
  size_t v_row_bytes = 0;
  int64_t length = 0;  // entries stored

  // Positions. Entries [0, n_kept) hold the ascending positions kept_pos[0 .. n_kept) (left by
  // compaction); entries from n_kept on hold consecutive positions tail_pos0, tail_pos0 + 1, ...
  const int32_t* kept_pos = nullptr;  // [n_kept]
  int64_t n_kept = 0;
  int64_t tail_pos0 = 0;

  // Entries whose position is <= pos: those a causal query at position pos attends to. Since
  // positions ascend with the entry index, they are always a prefix [0, visible(pos)).
  int64_t visible(int64_t pos) const {
    if (pos >= tail_pos0) return std::min(length, n_kept + (pos - tail_pos0 + 1));
    return std::upper_bound(kept_pos, kept_pos + n_kept, pos) - kept_pos;
  }

  // Calls fn(first_entry, key_row, value_row, count) for maximal runs of entries in [begin, end)
  // whose rows are contiguous (one per page run touched; one for a dense head).
  template <typename Fn>
  void for_each_run(int64_t begin, int64_t end, const Fn& fn) const {
    if (pages == nullptr) {
      if (begin < end)
        fn(begin, k_base + static_cast<size_t>(begin) * k_row_bytes,
           v_base + static_cast<size_t>(begin) * v_row_bytes, end - begin);
      return;
    }
    const int64_t run = run_tokens > 0 ? run_tokens : page_tokens;
    while (begin < end) {
      const int64_t page = begin / page_tokens;
      const int64_t slot = begin - page * page_tokens;
      const int64_t in_run = slot % run;
      const int64_t count = std::min(end - begin, run - in_run);
      const size_t run_off = static_cast<size_t>(pages[page]) * page_bytes + static_cast<size_t>(slot / run) * run_bytes;
      fn(begin, k_base + run_off + static_cast<size_t>(in_run) * k_row_bytes,
         v_base + run_off + static_cast<size_t>(in_run) * v_row_bytes, count);
      begin += count;
    }
  }
};

}  // namespace tangram
