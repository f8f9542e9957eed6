// The read probes: what they count and what they refuse (their rates depend on the machine and
// its load, so only that they are measured is checked, never how fast).
#include <gtest/gtest.h>

#include <cmath>

#include "common/thread_pool.h"
#include "kernels/memory_bandwidth.h"

namespace tangram {
namespace {

TEST(MemoryBandwidth, SequentialProbeReadsTheWholeBuffer) {
  ThreadPool pool(2);
  const BandwidthResult r = measure_read_bandwidth(pool, size_t{4} << 20, 2);
  EXPECT_EQ(r.buffer_bytes, size_t{4} << 20);
  EXPECT_EQ(r.threads, 2);
  EXPECT_TRUE(std::isfinite(r.read_gbps));
  EXPECT_GT(r.read_gbps, 0.0);
}

TEST(MemoryBandwidth, ScatteredProbeReadsWholeRunsOfWholeLines) {
  ThreadPool pool(2);
  // A Q8_0 page column of 16 tokens at head size 128: 16 x (136 + 136) bytes, 68 lines.
  auto q8 = measure_scattered_read_bandwidth(pool, 4352, size_t{1} << 20, 2);
  ASSERT_TRUE(q8.ok()) << q8.error().message;
  EXPECT_EQ(q8->buffer_bytes, (size_t{1} << 20) / 4352 * 4352);
  EXPECT_EQ(q8->threads, 2);
  EXPECT_TRUE(std::isfinite(q8->read_gbps));
  EXPECT_GT(q8->read_gbps, 0.0);
  // A run that ends inside a line is read to the line's end, as a page column's last row is.
  auto odd = measure_scattered_read_bandwidth(pool, 100, size_t{1} << 20, 1);
  ASSERT_TRUE(odd.ok()) << odd.error().message;
  EXPECT_EQ(odd->buffer_bytes, (size_t{1} << 20) / 128 * 128);
}

TEST(MemoryBandwidth, ScatteredProbeRefusesRunsItCannotScatter) {
  ThreadPool pool(2);
  EXPECT_FALSE(measure_scattered_read_bandwidth(pool, 0, size_t{1} << 20, 1).ok());
  // Two threads need two runs each: 4 runs of 256 KiB do not fit in 1 MiB minus a byte.
  EXPECT_FALSE(
      measure_scattered_read_bandwidth(pool, size_t{256} << 10, (size_t{1} << 20) - 1, 1).ok());
  EXPECT_TRUE(measure_scattered_read_bandwidth(pool, size_t{256} << 10, size_t{1} << 20, 1).ok());
}

}  // namespace
}  // namespace tangram
