// Measures the machine's sustained memory read bandwidth, the ceiling for decode speed: a
// decode step must stream every weight byte once, so tok/s ≤ bandwidth / weight bytes.
#pragma once

#include <cstddef>

#include "common/thread_pool.h"

namespace tangram {

struct BandwidthResult {
  double read_gbps = 0;   // best of the repetitions, GB/s (1e9 bytes per second)
  // Bytes over the process's CPU seconds, best repetition: GB/s per busy core, the figure to
  // hold a kernel's CPU-time rate against when other jobs share the machine.
  double cpu_gbps_per_core = 0;
  size_t buffer_bytes = 0;
  int threads = 0;
};

// Sums a buffer much larger than the last-level cache with all pool threads, best of `reps`.
BandwidthResult measure_read_bandwidth(ThreadPool& pool, size_t buffer_bytes = size_t{1} << 30,
                                       int reps = 5);

}  // namespace tangram
