// Measures the machine's sustained memory read bandwidth, the ceiling for decode speed: a
// decode step must stream every weight byte once, so tok/s ≤ bandwidth / weight bytes. And the
// same read over scattered runs, the pattern of attention over KV pages, whose ceiling it is.
#pragma once

#include <cstddef>

#include "common/result.h"
#include "common/thread_pool.h"

namespace tangram {

struct BandwidthResult {
  double read_gbps = 0;  // best of the repetitions, GB/s (1e9 bytes per second)
  // Bytes over the process's CPU seconds, best repetition: GB/s per busy core, the figure to
  // hold a kernel's CPU-time rate against when other jobs share the machine.
  double cpu_gbps_per_core = 0;
  size_t buffer_bytes = 0;
  int threads = 0;
};

// Sums a buffer much larger than the last-level cache with all pool threads, best of `reps`.
BandwidthResult measure_read_bandwidth(ThreadPool& pool, size_t buffer_bytes = size_t{1} << 30,
                                       int reps = 5);

// The same sum over runs of run_bytes (rounded up to whole 64-byte lines) taken in a fixed
// random order, the way attention reads a cache's pages: each run whole, the next one
// prefetched into L2 line by line while this one is summed, as the attention loops prefetch a
// head's next block. The buffer is 2 MiB aligned and advised for huge pages, as the KV arena
// is. Where each new run costs a page walk or a restarted hardware stream, this is the rate
// paged KV can be read at, lower than the sequential probe's; buffer_bytes / threads must hold
// at least two runs. Errors: a run of 0 bytes, or one too large for that.
Result<BandwidthResult> measure_scattered_read_bandwidth(ThreadPool& pool, size_t run_bytes,
                                                         size_t buffer_bytes = size_t{256} << 20,
                                                         int reps = 5);

}  // namespace tangram
