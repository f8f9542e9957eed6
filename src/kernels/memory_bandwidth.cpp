#include "kernels/memory_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "common/cpu_time.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace tangram {
namespace {

// Sum of floats in [b, e): enough arithmetic to stay memory-bound, not compute-bound.
float sum_range(const float* p, size_t n) {
#if defined(__AVX2__)
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(),
         a3 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  float s = 0;
  for (float v : lanes) s += v;
  for (; i < n; ++i) s += p[i];
  return s;
#else
  float s = 0;
  for (size_t i = 0; i < n; ++i) s += p[i];
  return s;
#endif
}

}  // namespace

BandwidthResult measure_read_bandwidth(ThreadPool& pool, size_t buffer_bytes, int reps) {
  const size_t n = buffer_bytes / sizeof(float);
  std::unique_ptr<float[]> buf(new float[n]);  // [n]
  // First touch from the pool threads, so pages are placed where they are read.
  pool.parallel_for(static_cast<int64_t>(n), [&](int64_t b, int64_t e, int) {
    std::fill(buf.get() + b, buf.get() + e, 1.0f);
  });
  std::vector<float> sink(static_cast<size_t>(pool.size()));
  double best = 0, best_per_core = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = process_cpu_seconds();
    pool.parallel_for(static_cast<int64_t>(n), [&](int64_t b, int64_t e, int tid) {
      sink[static_cast<size_t>(tid)] += sum_range(buf.get() + b, static_cast<size_t>(e - b));
    }, 1024);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = process_cpu_seconds() - cpu0;
    best = std::max(best, static_cast<double>(n * sizeof(float)) / s / 1e9);
    if (cpu > 0) best_per_core = std::max(best_per_core, static_cast<double>(n * sizeof(float)) / cpu / 1e9);
  }
  volatile float keep = sink[0];  // the sums must not be optimised away
  (void)keep;
  return {best, best_per_core, n * sizeof(float), pool.size()};
}

}  // namespace tangram
