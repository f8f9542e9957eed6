// Read-only description of where one KV head of one sequence keeps its entries and which token
// positions they hold. The attention kernels see only this, so paged and dense storage share
// every line of the kernel.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kv/block_pool.h"
#include "kv/key_tiles.h"

namespace tangram {

struct KvHeadView {
  // Row addressing. A paged head keeps entry e in page pages[e / page_tokens], slot
  // s = e % page_tokens, run s / R of its column (R = run_tokens, 0 for one run of the whole
  // column): the run starts at k_base + pages[e / page_tokens] * page_bytes + (s / R) * run_bytes
  // (its keys; its values likewise from v_base), and the entry is its token s % R: the value row
  // at (s % R) * v_row_bytes from the run's values, the key row at (s % R) * k_row_bytes from its
  // keys when key_layout is Rows, token s % R of the run's key tile otherwise (key_tiles.h). A
  // dense head has pages == nullptr, plain rows, and keeps entry e at k_base + e * k_row_bytes
  // (values at v_base + e * v_row_bytes).
  const uint8_t* k_base = nullptr;
  const uint8_t* v_base = nullptr;
  const PageId* pages = nullptr;  // [ceil(length / page_tokens)] or nullptr (dense)
  int64_t page_tokens = 1;
  size_t page_bytes = 0;
  int64_t run_tokens = 0;  // R: slots per run, a divisor of page_tokens; 0: page_tokens
  size_t run_bytes = 0;    // bytes from one run's first key row to the next run's
  size_t k_row_bytes = 0;
  size_t v_row_bytes = 0;
  KeyLayout key_layout = KeyLayout::Rows;
  int head_dim = 0;    // key row length (tiled keys are read back through it)
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

  int64_t run_length() const { return run_tokens > 0 ? run_tokens : page_tokens; }

  // Calls fn(first_entry, run_offset, first_token, count) for the maximal stretches of entries
  // [begin, end) inside one run: entries [first_entry, first_entry + count) are the run's tokens
  // from first_token on, and the run's keys start at k_base + run_offset, its values at
  // v_base + run_offset. A dense head is one run of every entry.
  template <typename Fn>
  void for_each_run_at(int64_t begin, int64_t end, const Fn& fn) const {
    if (pages == nullptr) {
      if (begin < end) fn(int64_t{0} + begin, size_t{0}, begin, end - begin);
      return;
    }
    const int64_t run = run_length();
    // Powers of two (every size the engine picks) by shifts and masks: the attention walk calls
    // this for every block, and the two 64-bit divisions a run took were 6% of a Q8_0 block.
    const auto p2 = static_cast<uint64_t>(page_tokens), r2 = static_cast<uint64_t>(run);
    if (std::has_single_bit(p2) && std::has_single_bit(r2)) {
      const int page_shift = std::countr_zero(p2), run_shift = std::countr_zero(r2);
      while (begin < end) {
        const int64_t slot = begin & (page_tokens - 1);
        const int64_t in_run = slot & (run - 1);
        const int64_t count = std::min(end - begin, run - in_run);
        fn(begin,
           static_cast<size_t>(pages[begin >> page_shift]) * page_bytes +
               static_cast<size_t>(slot >> run_shift) * run_bytes,
           in_run, count);
        begin += count;
      }
      return;
    }
    while (begin < end) {
      const int64_t page = begin / page_tokens;
      const int64_t slot = begin - page * page_tokens;
      const int64_t in_run = slot % run;
      const int64_t count = std::min(end - begin, run - in_run);
      fn(begin,
         static_cast<size_t>(pages[page]) * page_bytes +
             static_cast<size_t>(slot / run) * run_bytes,
         in_run, count);
      begin += count;
    }
  }

  // Calls fn(first_entry, key_row, value_row, count) for maximal runs of entries in [begin, end)
  // whose rows are contiguous (one per page run touched; one for a dense head). key_row is the
  // first entry's key row for plain-row keys and null for key tiles (read them through
  // copy_keys or for_each_key_tile).
  template <typename Fn>
  void for_each_run(int64_t begin, int64_t end, const Fn& fn) const {
    for_each_run_at(begin, end, [&](int64_t first, size_t off, int64_t token, int64_t count) {
      const size_t k_off = off + static_cast<size_t>(token) * k_row_bytes;
      fn(first, key_layout == KeyLayout::Rows ? k_base + k_off : nullptr,
         v_base + off + static_cast<size_t>(token) * v_row_bytes, count);
    });
  }

  // Key tiles: calls fn(first_entry, tile, first_token, count) per run touched in [begin, end).
  template <typename Fn>
  void for_each_key_tile(int64_t begin, int64_t end, const Fn& fn) const {
    for_each_run_at(begin, end, [&](int64_t first, size_t off, int64_t token, int64_t count) {
      fn(first, k_base + off, token, count);
    });
  }

  // The key rows of entries [begin, end) as plain rows, out: [end - begin][k_row_bytes].
  void copy_keys(int64_t begin, int64_t end, uint8_t* out) const {
    const int64_t run = run_length();
    for_each_run_at(begin, end, [&](int64_t first, size_t off, int64_t token, int64_t count) {
      uint8_t* dst = out + static_cast<size_t>(first - begin) * k_row_bytes;
      if (key_layout == KeyLayout::Rows) {
        std::memcpy(dst, k_base + off + static_cast<size_t>(token) * k_row_bytes,
                    static_cast<size_t>(count) * k_row_bytes);
        return;
      }
      load_tiled_keys(k_base + off, run, token, count, dst, head_dim);
    });
  }
};

}  // namespace tangram
