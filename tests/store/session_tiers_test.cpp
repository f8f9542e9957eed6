// SessionTiers on its own: the write-behind queue (the tiers under a scheduler are tested in
// tests/scheduler/tiered_scheduler_test.cpp).
#include <gtest/gtest.h>

#include <string>

#include "store/session_disk_store.h"
#include "store/session_tiers.h"
#include "support/test_support.h"

namespace tangram::testing {
namespace {

// Write-behind: persist() returns at once and the writer thread stores the blob; the newest
// state always wins, an erase is final even against a queued or running write, and destruction
// writes whatever is still queued.
TEST(SessionTierQueue, WriteBehindKeepsTheNewestStateAndErasesForGood) {
  const auto dir = temp_dir() / "kv";
  {
    SessionTierOptions o;
    o.disk_dir = dir;
    auto tiers = SessionTiers::create(o);
    ASSERT_TRUE(tiers.ok()) << tiers.message();
    SessionTiers& t = **tiers;
    for (int i = 0; i <= 50; ++i) {
      t.persist("a", std::string(4096, 'a') + std::to_string(i));
      t.persist("b", std::string(4096, 'b') + std::to_string(i));
      auto a = t.fetch("a");  // queued or written: either way the newest
      ASSERT_TRUE(a.has_value());
      EXPECT_EQ(a->blob, std::string(4096, 'a') + std::to_string(i));
    }
    t.erase("b");
    t.flush();
    EXPECT_EQ(t.where("b").tier, "none");
    EXPECT_EQ(t.where("a").tier, "disk");
    EXPECT_EQ(t.where("a").bytes, static_cast<int64_t>(12 + 1 + 4096 + 2));  // frame + blob "aaa...50"
    t.persist("c", "last words");  // still queued when the tiers go
  }
  auto disk = SessionDiskStore::open(dir, 1 << 20);
  ASSERT_TRUE(disk.ok()) << disk.message();
  EXPECT_EQ((*disk)->get("a").value(), std::string(4096, 'a') + "50");
  EXPECT_FALSE((*disk)->contains("b"));
  EXPECT_EQ((*disk)->get("c").value(), "last words");
}

}  // namespace
}  // namespace tangram::testing
