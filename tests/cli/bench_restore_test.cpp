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
  const auto all = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(all.is_object()) << r.output;
  const auto& j = all["restore"];
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
  EXPECT_FALSE(all.contains("oversubscribed"));
  const auto bad = testing::run_tangram("bench-restore --preset tiny-qwen3 --type f32 --contexts 64 --kv-policy nope");
  EXPECT_NE(bad.exit_code, 0);
}

// The oversubscribed workload: every configuration plays every turn; with a tier, evicted
// conversations are restored instead of recomputed, so fewer tokens are prefilled.
TEST(CliBenchRestore, OversubscribedWorkloadRestoresInsteadOfRecomputing) {
  const auto dir = testing::temp_dir();
  const auto json = (dir / "w.json").string();
  const auto r = testing::run_tangram("bench-restore --preset tiny-qwen3 --type f32 --workload-only --sessions 12 "
                                      "--turns 3 --first-tokens 96 --followup-tokens 8 --gen-tokens 4 --cache-dir '" +
                                      dir.string() + "' --json '" + json + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(json);
  const auto all = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(all.is_object()) << r.output;
  EXPECT_TRUE(all["restore"].empty());
  const auto& w = all["oversubscribed"];
  ASSERT_EQ(w["configs"].size(), 3u) << r.output;
  EXPECT_LT(w["resident_capacity_sessions"].get<double>(), 12.0);
  const auto& none = w["configs"][0];
  EXPECT_EQ(none["restores"], 0);
  EXPECT_GT(none["evictions"].get<int64_t>(), 0);
  for (size_t k = 1; k < 3; ++k) {
    const auto& tiered = w["configs"][k];
    SCOPED_TRACE(tiered["name"].get<std::string>());
    EXPECT_GT(tiered["restores"].get<int64_t>(), 0);
    EXPECT_LT(tiered["prefill_tokens"].get<int64_t>(), none["prefill_tokens"].get<int64_t>());
    EXPECT_GT(tiered["cached_tokens"].get<int64_t>(), none["cached_tokens"].get<int64_t>());
  }
  EXPECT_NE(testing::run_tangram("bench-restore --preset tiny-qwen3 --workload-only").exit_code, 0);
}

}  // namespace
}  // namespace tangram
