#include "common/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
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
            if (b % grain != 0) ADD_FAILURE() << "chunk start " << b << " not a multiple of " << grain;
            for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
          },
          grain);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n=" << n << " i=" << i;
    }
  }
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
