#include "kernels/memory_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "common/cpu_time.h"
#include "common/huge_pages.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace tangram {
namespace {

// Sum of n floats from p: enough arithmetic to stay memory-bound, not compute-bound. With next
// (null: none), every line of the n floats from next is prefetched into L2 along the way, one
// prefetch per line read (the scattered probe's next run, as attention prefetches its next block).
float sum_range(const float* p, size_t n, const float* next = nullptr) {
#if defined(__AVX2__)
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(),
         a3 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    if (next != nullptr) {
      __builtin_prefetch(next + i, 0, 2);
      __builtin_prefetch(next + i + 16, 0, 2);
    }
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
  }
  if (i + 16 <= n) {  // a last odd line
    if (next != nullptr) __builtin_prefetch(next + i, 0, 2);
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    i += 16;
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  float s = 0;
  for (float v : lanes) s += v;
  for (; i < n; ++i) s += p[i];
  return s;
#else
  for (size_t i = 0; next != nullptr && i < n; i += 16) __builtin_prefetch(next + i, 0, 2);
  float s = 0;
  for (size_t i = 0; i < n; ++i) s += p[i];
  return s;
#endif
}

// Runs read(begin, end) -> the sum of what it read over [0, items) on the pool's threads (chunks
// of `grain` items), reps times, and returns the best rates for the `bytes` one repetition reads:
// GB/s over wall time and per CPU second.
template <typename Read>
BandwidthResult best_of(ThreadPool& pool, int64_t items, int64_t grain, size_t bytes, int reps,
                        const Read& read) {
  std::vector<float> sink(static_cast<size_t>(pool.size()));
  double best = 0, best_per_core = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = process_cpu_seconds();
    pool.parallel_for(
        items, [&](int64_t b, int64_t e, int tid) { sink[static_cast<size_t>(tid)] += read(b, e); },
        grain);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = process_cpu_seconds() - cpu0;
    best = std::max(best, static_cast<double>(bytes) / s / 1e9);
    if (cpu > 0) best_per_core = std::max(best_per_core, static_cast<double>(bytes) / cpu / 1e9);
  }
  volatile float keep = sink[0];  // the sums must not be optimised away
  (void)keep;
  return {best, best_per_core, bytes, pool.size()};
}

constexpr size_t kLineBytes = 64;

}  // namespace

Result<BandwidthResult> measure_scattered_read_bandwidth(ThreadPool& pool, size_t run_bytes,
                                                         size_t buffer_bytes, int reps) {
  const size_t run = round_up_to(run_bytes, kLineBytes);
  const size_t n_runs = run > 0 ? buffer_bytes / run : 0;
  if (run == 0 || n_runs < 2 * static_cast<size_t>(pool.size()))
    return make_error(
        "scattered read probe: runs of {} bytes: need at least two per thread in {} bytes",
        run_bytes, buffer_bytes);
  const size_t bytes = round_up_to(n_runs * run, kHugePageBytes);
  // As the KV arena: 2 MiB aligned, advised for huge pages.
  TG_ASSIGN(HugePageBuffer memory, allocate_huge_page_buffer(bytes, "scattered read probe"));
  float* buf = reinterpret_cast<float*>(memory.get());  // [bytes / 4]
  const size_t floats = bytes / sizeof(float), run_floats = run / sizeof(float);
  pool.parallel_for(static_cast<int64_t>(floats),
                    [&](int64_t b, int64_t e, int) { std::fill(buf + b, buf + e, 1.0f); });
  std::vector<size_t> order(n_runs);  // run i of the walk starts at float order[i] * run_floats
  std::iota(order.begin(), order.end(), size_t{0});
  std::shuffle(order.begin(), order.end(),
               std::mt19937_64(20261205));  // fixed: every probe reads alike
  const float* base = buf;
  return best_of(
      pool, static_cast<int64_t>(n_runs), 1, n_runs * run, reps, [&](int64_t b, int64_t e) {
        float sum = 0;
        for (int64_t i = b; i < e; ++i) {
          const float* next =
              i + 1 < e ? base + order[static_cast<size_t>(i + 1)] * run_floats : nullptr;
          sum += sum_range(base + order[static_cast<size_t>(i)] * run_floats, run_floats, next);
        }
        return sum;
      });
}

BandwidthResult measure_read_bandwidth(ThreadPool& pool, size_t buffer_bytes, int reps) {
  const size_t n = buffer_bytes / sizeof(float);
  std::unique_ptr<float[]> buf(new float[n]);  // [n]
  // First touch from the pool threads, so pages are placed where they are read.
  pool.parallel_for(static_cast<int64_t>(n), [&](int64_t b, int64_t e, int) {
    std::fill(buf.get() + b, buf.get() + e, 1.0f);
  });
  return best_of(
      pool, static_cast<int64_t>(n), 1024, n * sizeof(float), reps,
      [&](int64_t b, int64_t e) { return sum_range(buf.get() + b, static_cast<size_t>(e - b)); });
}

}  // namespace tangram
