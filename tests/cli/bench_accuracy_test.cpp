// `tangram bench -m stories260K.gguf`: the accuracy part on real weights. With no --profile,
// tangram's profile is made from the model's own text into the report folder; the accuracy text
// is cut to fit the context (here -c 200); planted facts stay off (no chat template); the report
// carries greedy agreement, perplexity and KL per policy and the accuracy-vs-retention plot.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace tangram {
namespace {

TEST(CliBenchAccuracy, RealModelGetsItsOwnProfileAndAWindowThatFits) {
  const auto out = testing::temp_dir() / "acc";
  const std::string model = testing::data_file("models/stories260K/stories260K.gguf").string();
  const auto r = testing::run_tangram(
      "bench -m '" + model +
      "' --policies full,uniform,tangram --ratios 0.4 --conversations 2 --concurrency 2 "
      "--turns 2 --first-turn-tokens 64 --followup-tokens 8 --gen-tokens 4 -c 200 -t 1 -o '" +
      out.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("planted facts off"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(out / "own_text_profile.json"));
  EXPECT_TRUE(std::filesystem::exists(out / "accuracy_vs_retention.svg"));
  const auto j = nlohmann::json::parse(testing::read_file(out / "report.json"), nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.output;
  EXPECT_EQ(j["accuracy_workload"]["window"], 200);
  EXPECT_EQ(j["accuracy_workload"]["chunk"], 50);
  EXPECT_NE(j["accuracy_workload"]["profile"].get<std::string>().find("own text"),
            std::string::npos);
  ASSERT_EQ(j["runs"].size(), 3u);
  for (const auto& run : j["runs"]) {
    SCOPED_TRACE(run["policy"].get<std::string>());
    const auto& acc = run["accuracy_on_text"];
    ASSERT_TRUE(acc.contains("perplexity")) << acc.dump();
    ASSERT_TRUE(acc.contains("greedy")) << acc.dump();
    // stories260K reads its own kind of text well: perplexity far below its 512-token vocabulary.
    EXPECT_LT(acc["perplexity"]["ppl"].get<double>(), 20.0);
    EXPECT_EQ(acc["perplexity"]["scored"], 199);
    const double retention = acc["effective_retention"].get<double>();
    if (run["policy"] == "full") {
      EXPECT_EQ(acc["perplexity"]["mean_kl"], 0.0);
      EXPECT_EQ(retention, 1.0);
    } else {
      EXPECT_GT(acc["perplexity"]["mean_kl"].get<double>(), 0.0);
      EXPECT_GT(acc["perplexity"]["compressions"].get<int64_t>(), 0);
      EXPECT_LT(retention, 1.0);
      EXPECT_GT(retention, 0.0);
    }
  }
  const std::string md = testing::read_file(out / "report.md");
  EXPECT_NE(md.find("## Accuracy against full KV"), std::string::npos);
  EXPECT_NE(md.find("accuracy_vs_retention.svg"), std::string::npos);
}

}  // namespace
}  // namespace tangram
