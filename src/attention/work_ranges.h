// Per-thread ranges of a work list, drained by the threads of one parallel region: each thread
// takes the items of its own range front to back and, once that range is empty, takes what is
// left of the other threads' ranges from their back ends.
//
// run_attention uses it for plans with a thread assignment (balanced_plan.h). The assignment
// decides where every thread starts, so on an idle machine each thread runs exactly its own
// items (the balanced split, each thread streaming its own sequences' pages); but when one
// thread is slowed or descheduled (a machine shared with other jobs, or items that cost more
// than the plan predicted), the other takes over the rest of its range instead of waiting for
// it. The owner and a thief each move one end of a range with a compare-and-swap on one word,
// so every item is taken exactly once.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace tangram {

class WorkRanges {
 public:
  // Room for n_threads ranges. Throws std::bad_alloc.
  void reserve(size_t n_threads) {
    if (n_threads <= capacity_) return;
    ranges_ = std::make_unique<Range[]>(n_threads);
    capacity_ = n_threads;
  }

  // Thread t's range becomes [thread_begin[t], thread_begin[t + 1]) (thread_begin ascending,
  // n_threads + 1 entries, n_threads within the reserve()d room; ranges beyond it are left
  // out). Not concurrent with take().
  void reset(std::span<const int32_t> thread_begin) {
    n_ = std::min(thread_begin.empty() ? 0 : thread_begin.size() - 1, capacity_);
    for (size_t t = 0; t < n_; ++t)
      ranges_[t].bounds.store(pack(thread_begin[t], thread_begin[t + 1]),
                              std::memory_order_relaxed);
  }

  // The next item for thread `thread` (< the reset's thread count): the front of its own range,
  // else the back of the next non-empty range after it (round robin); -1 when all are empty.
  int32_t take(int thread) {
    if (n_ == 0) return -1;
    const auto self = static_cast<size_t>(thread);
    for (size_t k = 0; k < n_; ++k) {
      std::atomic<uint64_t>& bounds = ranges_[(self + k) % n_].bounds;
      uint64_t cur = bounds.load(std::memory_order_relaxed);
      for (;;) {
        const int32_t begin = first(cur);
        const int32_t end = last(cur);
        if (begin >= end) break;
        const bool own = k == 0;
        const uint64_t next = own ? pack(begin + 1, end) : pack(begin, end - 1);
        if (bounds.compare_exchange_weak(cur, next, std::memory_order_relaxed))
          return own ? begin : end - 1;
      }
    }
    return -1;
  }

 private:
  static uint64_t pack(int32_t begin, int32_t end) {
    return uint64_t{static_cast<uint32_t>(begin)} | uint64_t{static_cast<uint32_t>(end)} << 32;
  }
  static int32_t first(uint64_t r) { return static_cast<int32_t>(static_cast<uint32_t>(r)); }
  static int32_t last(uint64_t r) { return static_cast<int32_t>(static_cast<uint32_t>(r >> 32)); }

  // One cache line per range: the owner updates its own often, a thief seldom.
  struct alignas(64) Range {
    std::atomic<uint64_t> bounds{0};  // begin (low 32 bits), end (high 32 bits)
  };
  std::unique_ptr<Range[]> ranges_;
  size_t n_ = 0;
  size_t capacity_ = 0;
};

}  // namespace tangram
