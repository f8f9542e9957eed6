// `tangram bench-restore` end to end on a tiny generated model: both tiers restore the session
// (the command itself fails otherwise) and the JSON holds every figure.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace tangram {
namespace {

TEST(CliBenchRestore, RestoresFromHostAndDisk) {
  const auto dir = testing::temp_dir();
  const auto json = (dir / "restore.json").string();
  const auto r = testing::run_tangram("bench-restore --preset tiny-qwen3 --type f32 --contexts 64,200 --cache-dir '" +
                                      dir.string() + "' --disk-dir '" + (dir / "disk").string() + "' --json '" + json + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(j.is_array()) << r.output;
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["context"], 64);
  EXPECT_EQ(j[1]["context"], 200);
  for (const auto& row : j) {
    EXPECT_GT(row["session_bytes"].get<int64_t>(), 0);
    EXPECT_GT(row["host_restore_s"].get<double>(), 0.0);
    EXPECT_GT(row["disk_restore_s"].get<double>(), 0.0);
    EXPECT_GT(row["reprefill_s"].get<double>(), 0.0);
  }
  // The session's KV grows with its context.
  EXPECT_GT(j[1]["session_bytes"].get<int64_t>(), j[0]["session_bytes"].get<int64_t>());
  const auto bad = testing::run_tangram("bench-restore --preset tiny-qwen3 --type f32 --contexts 64 --kv-policy nope");
  EXPECT_NE(bad.exit_code, 0);
}

}  // namespace
}  // namespace tangram
