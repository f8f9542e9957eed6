// `tangram bench -m stories260K.gguf`: the accuracy part on real weights. With no --profile,
// tangram's profile is made from the model's own text into the report folder; the accuracy text
// is cut to fit the context (here -c 200); planted facts stay off (no chat template); the report
// carries greedy agreement, perplexity and KL per policy and the accuracy-vs-retention plot. Task
// accuracy: recall conversations on a task model beside the throughput runs.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli/recall_test_set.h"
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

// Task accuracy beside throughput: every run also plays held-out recall conversations on the task
// model (here stories260K, which cannot recall: the test checks the pipeline and the report, not
// the score), the generated throughput model runs no accuracy comparison unless
// --numerical-check asks for one, labelled as such.
TEST(CliBenchAccuracy, TaskAccuracyOnTheTaskModelBesideThroughput) {
  const auto out = testing::temp_dir() / "task";
  const std::string model = testing::data_file("models/stories260K/stories260K.gguf").string();
  const auto r = testing::run_tangram(
      "bench --preset tiny-qwen3 --type f32 --policies full,uniform,dynamic --ratios 0.5 "
      "--conversations 2 --concurrency 2 --turns 2 --first-turn-tokens 64 --followup-tokens 8 "
      "--gen-tokens 4 -t 1 --task-model '" +
      model + "' --task-set '" +
      testing::write_temp_file("task.jsonl", testing::small_recall_set()) + "' -o '" +
      out.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(out / "task_accuracy_vs_retention.svg"));
  EXPECT_TRUE(std::filesystem::exists(out / "task_accuracy_vs_throughput.svg"));
  EXPECT_FALSE(std::filesystem::exists(out / "accuracy_vs_retention.svg"));
  const auto j = nlohmann::json::parse(testing::read_file(out / "report.json"), nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.output;
  ASSERT_EQ(j["runs"].size(), 4u);  // dynamic also at 0.5 x --dynamic-bracket
  for (const auto& run : j["runs"]) {
    SCOPED_TRACE(run["policy"].get<std::string>());
    ASSERT_TRUE(run.contains("task")) << run.dump();
    EXPECT_EQ(run["task"]["conversations"], 2);
    EXPECT_GT(run["task"]["questions"].get<int64_t>(), 0);
    const double retention = run["task"]["retention"].get<double>();
    if (run["policy"] == "full")
      EXPECT_EQ(retention, 1.0);
    else
      EXPECT_LT(retention, 0.9);
    EXPECT_FALSE(run["accuracy_on_text"].contains("perplexity")) << "random weights: no accuracy";
  }
  const std::string md = testing::read_file(out / "report.md");
  EXPECT_NE(md.find("## Task accuracy"), std::string::npos);
  EXPECT_EQ(md.find("## Accuracy against full KV"), std::string::npos);

  const auto check_out = testing::temp_dir() / "numerical";
  const auto c = testing::run_tangram(
      "bench --preset tiny-qwen3 --type f32 --policies full,uniform --ratios 0.5 "
      "--conversations 2 --concurrency 2 --turns 1 --first-turn-tokens 64 --gen-tokens 4 -t 1 "
      "--numerical-check -o '" +
      check_out.string() + "'");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  const std::string check_md = testing::read_file(check_out / "report.md");
  EXPECT_NE(check_md.find("Numerical check against full KV (random weights: not accuracy)"),
            std::string::npos);
}

TEST(CliBenchAccuracy, FlagsThatWouldNotActAreRefused) {
  const std::string model = testing::data_file("models/stories260K/stories260K.gguf").string();
  for (const std::string& flags :
       {"-m '" + model + "' --numerical-check", std::string("--numerical-check --no-accuracy"),
        std::string("--task-conversations 3"), "--task-set '" + model + "'"}) {
    const auto r = testing::run_tangram("bench --quick --dry-run " + flags);
    EXPECT_EQ(r.exit_code, 1) << flags << ": " << r.output;
    EXPECT_NE(r.output.find("error:"), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace tangram
