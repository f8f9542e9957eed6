// The report sections of `tangram bench` beyond the policy table, on a tiny generated model: the
// restore table (--restore-contexts: both tiers restore the session, or the command fails), the
// oversubscribed workload (--oversubscription) and the flags bench refuses.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace tangram {
namespace {

TEST(CliBenchSections, RestoreContextsAndOversubscriptionInTheReport) {
  const auto dir = testing::temp_dir();
  const auto out = dir / "out";
  const auto r = testing::run_tangram(
      "bench --preset tiny-qwen3 --type f32 --policies full,uniform --no-accuracy --quick "
      "--conversations 12 "
      "--concurrency 2 --turns 3 --first-turn-tokens 96 --followup-tokens 8 --gen-tokens 4 "
      "--restore-contexts 64,200 "
      "--oversubscription 10 --json --cache-dir '" +
      dir.string() + "' --disk-dir '" + (dir / "disk").string() + "' -o '" + out.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto all = nlohmann::json::parse(testing::read_file(out / "report.json"), nullptr, false);
  ASSERT_TRUE(all.is_object()) << r.output;
  EXPECT_EQ(all["workload"]["followup_tokens"], 8);
  EXPECT_EQ(all["workload"]["output_tokens"], 4);
  const auto& rows = all["restore_contexts"];
  ASSERT_EQ(rows.size(), 2u) << r.output;
  EXPECT_EQ(rows[0]["context"], 64);
  EXPECT_EQ(rows[1]["context"], 200);
  for (const auto& row : rows) {
    EXPECT_GT(row["session_bytes"].get<int64_t>(), 0);
    EXPECT_GT(row["host_restore_s"].get<double>(), 0.0);
    EXPECT_GT(row["disk_restore_s"].get<double>(), 0.0);
    EXPECT_GT(row["reprefill_s"].get<double>(), 0.0);
  }
  // The session's KV grows with its context.
  EXPECT_GT(rows[1]["session_bytes"].get<int64_t>(), rows[0]["session_bytes"].get<int64_t>());
  // With a tier, evicted conversations are restored instead of recomputed.
  const auto& w = all["oversubscribed"];
  ASSERT_EQ(w["configs"].size(), 3u) << r.output;
  const auto& none = w["configs"][0];
  EXPECT_EQ(none["restores"], 0);
  for (size_t k = 1; k < 3; ++k) {
    SCOPED_TRACE(w["configs"][k]["name"].get<std::string>());
    EXPECT_GT(w["configs"][k]["restores"].get<int64_t>(), 0);
  }
  EXPECT_TRUE(testing::read_file(out / "report.md").find("Restoring an idle conversation") !=
              std::string::npos);
}

// Flags that a run would overwrite are refused, naming the list-valued flag to use.
TEST(CliBenchSections, RefusesTheEngineFlagsItSweeps) {
  const std::pair<const char*, const char*> cases[] = {{"--kv-policy tangram", "--policies"},
                                                       {"--kv-ratio 0.5", "--ratios"},
                                                       {"--page-group-size 2", "--group-sizes"},
                                                       {"--kv-scorer snapkv", "--scorer"},
                                                       {"--kv-profile /dev/null", "--profile"}};
  for (const auto& [flag, use] : cases) {
    const auto r = testing::run_tangram(std::string("bench --quick ") + flag);
    EXPECT_NE(r.exit_code, 0) << flag;
    EXPECT_NE(r.output.find(use), std::string::npos) << flag << ": " << r.output;
  }
}

}  // namespace
}  // namespace tangram
