// `tangram recall` end to end on stories260K with a small set written here: the text and JSON
// reports, a compressing policy's retention, and clean errors (exit 1, a message naming the
// problem, no crash) for a malformed set. Accuracy on the shipped set needs a chat model that
// can recall; stories260K only checks the pipeline.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "cli/recall_test_set.h"
#include "support/test_support.h"

namespace tangram {
namespace {

using testing::run_tangram;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string model_arg() {
  return "-m '" + testing::data_file("models/stories260K/stories260K.gguf").string() + "'";
}

TEST(RecallCli, HelpNamesTheSetAndTheEngineFlags) {
  const auto r = run_tangram("recall --help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "--set")) << r.output;
  EXPECT_TRUE(contains(r.output, "--kv-policy")) << r.output;
}

TEST(RecallCli, ReportsAccuracyPerKindAndRetention) {
  const std::string set =
      testing::write_temp_file("recall-small.jsonl", testing::small_recall_set());
  const auto text = run_tangram("recall " + model_arg() + " --set '" + set + "' -t 2");
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_TRUE(contains(text.output, "single")) << text.output;
  EXPECT_TRUE(contains(text.output, "policy full")) << text.output;
  const auto json = run_tangram("recall " + model_arg() + " --set '" + set +
                                "' -t 2 --json --kv-policy uniform --kv-ratio 0.5 --kv-chunk 80");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const auto start = json.output.find('{');
  ASSERT_NE(start, std::string::npos) << json.output;
  const nlohmann::json j = nlohmann::json::parse(json.output.substr(start));
  EXPECT_EQ(j["policy"], "uniform");
  EXPECT_EQ(j["conversations"], 2);
  EXPECT_EQ(j["questions"], 2);
  EXPECT_EQ(j["by_kind"]["single"]["questions"], 1);
  EXPECT_EQ(j["by_kind"]["update"]["questions"], 1);
  EXPECT_LT(j["retention"].get<double>(), 0.9);
  EXPECT_GT(j["retention"].get<double>(), 0.3);
  // The story model cannot know the code: both answers are misses, reported with their text.
  EXPECT_EQ(j["correct"], 0);
  EXPECT_EQ(j["misses"].size(), 2u);
}

TEST(RecallCli, MalformedSetsGiveCleanErrors) {
  const std::string bad =
      testing::write_temp_file("recall-bad.jsonl", testing::small_recall_set() + "{\"kind\": 3}\n");
  const auto r = run_tangram("recall " + model_arg() + " --set '" + bad + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "line 3")) << r.output;
  const std::string empty = testing::write_temp_file("recall-empty.jsonl", "\n");
  const auto e = run_tangram("recall " + model_arg() + " --set '" + empty + "'");
  EXPECT_EQ(e.exit_code, 1) << e.output;
  EXPECT_TRUE(contains(e.output, "no question")) << e.output;
}

}  // namespace
}  // namespace tangram
