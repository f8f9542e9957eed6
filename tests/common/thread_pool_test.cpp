#include "common/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <ctime>
#include <numeric>
#include <vector>

namespace tangram {
namespace {

TEST(ThreadPool, RunCallsEveryThreadOnce) {
  for (int n : {1, 2, 3, 5}) {
    ThreadPool pool(n);
    std::vector<std::atomic<int>> calls(static_cast<size_t>(n));
    for (int rep = 0; rep < 100; ++rep)
      pool.run([&](int tid, int nth) {
        EXPECT_EQ(nth, n);
        calls[static_cast<size_t>(tid)]++;
      });
    for (auto& c : calls) EXPECT_EQ(c.load(), 100);
  }
}

TEST(ThreadPool, ParallelForCoversRangeExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 2, 7, 64, 1000, 1001}) {
    for (int64_t grain : {1, 4, 32}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(
          n,
          [&](int64_t b, int64_t e, int) {
            EXPECT_LE(b, e);
            if (b % grain != 0)
              ADD_FAILURE() << "chunk start " << b << " not a multiple of " << grain;
            for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
          },
          grain);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n=" << n << " i=" << i;
    }
  }
}

// cpu_seconds() counts every thread's CPU time: each thread burns at least 20 ms of its own
// CPU time, and the pool's clock must have grown by at least their sum (a clock that left out
// the workers or the calling thread would fall 20-40 ms short).
TEST(ThreadPool, CpuSecondsCountsEveryThread) {
  ThreadPool pool(3);
  std::vector<double> burned(3, 0.0);
  const auto thread_seconds = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  };
  const double before = pool.cpu_seconds();
  pool.run([&](int tid, int) {
    const double start = thread_seconds();
    volatile uint64_t sink = 0;
    while (thread_seconds() - start < 0.02) sink = sink + 1;
    burned[static_cast<size_t>(tid)] = thread_seconds() - start;
  });
  const double grown = pool.cpu_seconds() - before;
  const double sum = std::accumulate(burned.begin(), burned.end(), 0.0);
  EXPECT_GE(sum, 0.06);
  EXPECT_GE(grown, sum);
}

TEST(ThreadPool, ResultsVisibleAfterRun) {
  ThreadPool pool(2);
  std::vector<int64_t> out(10000);
  for (int rep = 0; rep < 50; ++rep) {
    pool.parallel_for(static_cast<int64_t>(out.size()), [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) out[static_cast<size_t>(i)] = i * rep;
    });
    const int64_t sum = std::accumulate(out.begin(), out.end(), int64_t{0});
    ASSERT_EQ(sum, int64_t{rep} * (int64_t{9999} * 10000 / 2));
  }
}

}  // namespace
}  // namespace tangram
