// WorkRanges: each thread drains its own range front to back, then the others' from the back,
// and under concurrent takers every item is taken exactly once.
#include "attention/work_ranges.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/thread_pool.h"

namespace tangram {
namespace {

std::vector<int32_t> drain(WorkRanges& ranges, int thread) {
  std::vector<int32_t> got;
  for (int32_t i = ranges.take(thread); i >= 0; i = ranges.take(thread)) got.push_back(i);
  return got;
}

TEST(WorkRanges, OwnRangeFrontToBackThenTheOthersFromTheirBacks) {
  WorkRanges ranges;
  ranges.reserve(3);
  const std::vector<int32_t> begin = {0, 3, 6, 6};
  ranges.reset(begin);
  EXPECT_EQ(ranges.take(1), 3);  // thread 1 has started its own range
  // Thread 0: its own items, then thread 1's unstarted ones from the back; thread 2 has none.
  EXPECT_EQ(drain(ranges, 0), (std::vector<int32_t>{0, 1, 2, 5, 4}));
  EXPECT_EQ(ranges.take(1), -1);
  EXPECT_EQ(ranges.take(2), -1);

  // An empty thread takes from the next threads round robin, each from its back.
  ranges.reset(std::vector<int32_t>{0, 2, 4, 4});
  EXPECT_EQ(drain(ranges, 2), (std::vector<int32_t>{1, 0, 3, 2}));
  EXPECT_EQ(ranges.take(0), -1);
}

TEST(WorkRanges, ResetReusesTheRoomAndLeavesOutRangesBeyondIt) {
  WorkRanges ranges;
  EXPECT_EQ(ranges.take(0), -1);  // nothing reserved: nothing to take
  ranges.reserve(2);
  ranges.reset(std::vector<int32_t>{0, 1, 2, 3});  // three ranges, room for two
  EXPECT_EQ(drain(ranges, 0), (std::vector<int32_t>{0, 1}));
  ranges.reserve(1);  // no shrinking
  ranges.reset(std::vector<int32_t>{0, 0, 1});
  EXPECT_EQ(drain(ranges, 1), (std::vector<int32_t>{0}));
  ranges.reset(std::vector<int32_t>{});
  EXPECT_EQ(ranges.take(0), -1);
}

TEST(WorkRanges, ConcurrentTakersTakeEveryItemOnce) {
  ThreadPool pool(4);
  WorkRanges ranges;
  ranges.reserve(4);
  const std::vector<std::vector<int32_t>> splits = {
      {0, 2500, 5000, 7500, 10000},  // even
      {0, 0, 0, 0, 10000},           // everything on the last thread
      {0, 9997, 9998, 9999, 10000},  // nearly everything on the first
      {0, 1, 1, 5000, 10000},
  };
  for (const auto& split : splits) {
    for (int rep = 0; rep < 5; ++rep) {
      ranges.reset(split);
      auto taken = std::make_unique<std::atomic<int>[]>(10000);
      std::vector<int64_t> per_thread(4, 0);
      pool.run([&](int t, int) {
        for (int32_t i = ranges.take(t); i >= 0; i = ranges.take(t)) {
          taken[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
          ++per_thread[static_cast<size_t>(t)];
        }
      });
      int64_t total = 0;
      for (const int64_t n : per_thread) total += n;
      EXPECT_EQ(total, 10000);
      for (int32_t i = 0; i < 10000; ++i)
        ASSERT_EQ(taken[static_cast<size_t>(i)].load(), 1) << "item " << i;
      EXPECT_EQ(ranges.take(0), -1);
    }
  }
}

}  // namespace
}  // namespace tangram
