#include "common/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace tangram {
namespace {

TEST(HugePages, BufferIsAlignedToAHugePageAndWritableToTheRoundedSize) {
  auto buf = allocate_huge_page_buffer(3 * kHugePageBytes / 2, "test buffer");
  ASSERT_TRUE(buf.ok()) << buf.message();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf->get()) % kHugePageBytes, 0u);
  // The rounded size (two huge pages) is the caller's to use.
  std::memset(buf->get(), 0x5A, 2 * kHugePageBytes);
  EXPECT_EQ(buf->get()[2 * kHugePageBytes - 1], 0x5A);
}

TEST(HugePages, RoundUpTo) {
  EXPECT_EQ(round_up_to(0, 64), 0u);
  EXPECT_EQ(round_up_to(1, 64), 64u);
  EXPECT_EQ(round_up_to(64, 64), 64u);
  EXPECT_EQ(round_up_to(kHugePageBytes + 1, kHugePageBytes), 2 * kHugePageBytes);
}

}  // namespace
}  // namespace tangram
