// `tangram perplexity` end to end on stories260K: the text and JSON reports, and clean errors
// (exit 1 or CLI11's usage code, a message, no crash) for bad input and flags that would not act.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

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
// The model's own greedy continuation of "Once upon a time" (llama2.c's output).
std::string text_arg() {
  return "-f '" +
         testing::data_file(
             "models/stories260K/expected/runc_greedy_prompt_once_upon_a_time_n256.txt")
             .string() +
         "'";
}

TEST(PerplexityCli, HelpNamesTheWindowConvention) {
  const auto r = run_tangram("perplexity --help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "llama-perplexity")) << r.output;
  EXPECT_TRUE(contains(r.output, "--chunk")) << r.output;
  EXPECT_TRUE(contains(r.output, "--kv-policy")) << r.output;
}

TEST(PerplexityCli, PrintsRunningAndFinalPerplexity) {
  const auto r = run_tangram("perplexity " + model_arg() + " " + text_arg() + " --chunk 64 -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "[window 1/1 turn 1]")) << r.output;
  EXPECT_TRUE(contains(r.output, "PPL = ")) << r.output;
  EXPECT_TRUE(contains(r.output, " +/- ")) << r.output;
  EXPECT_FALSE(contains(r.output, "KL(")) << r.output;  // full KV: nothing to compare
}

TEST(PerplexityCli, JsonReportsKlAndRetentionWhenCompressing) {
  const auto r = run_tangram(
      "perplexity " + model_arg() + " " + text_arg() +
      " --chunk 32 --kv-policy uniform --kv-ratio 0.5 --kv-window 16 --kv-type f32 -t 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t brace = r.output.find("\n{");  // progress lines (stderr) come first
  ASSERT_NE(brace, std::string::npos) << r.output;
  const auto j = nlohmann::json::parse(r.output.substr(brace + 1));
  EXPECT_EQ(j["policy"], "uniform");
  EXPECT_TRUE(j["compared_with_full"].get<bool>());
  EXPECT_GT(j["ppl"].get<double>(), 1.0);
  EXPECT_GT(j["ppl_stderr"].get<double>(), 0.0);
  EXPECT_GT(j["mean_kl"].get<double>(), 0.0);
  EXPECT_GT(j["retention_bytes"].get<double>(), 0.3);
  EXPECT_LT(j["retention_bytes"].get<double>(), 1.0);
  EXPECT_GT(j["compressions"].get<int64_t>(), 0);
}

TEST(PerplexityCli, BadInputGivesCleanErrors) {
  const auto dir = testing::temp_dir();
  const std::string empty = (dir / "empty.txt").string();
  std::ofstream(empty).close();
  struct Case {
    std::string args, message;
  };
  const Case cases[] = {
      {model_arg() + " -f '" + (dir / "missing.txt").string() + "'", "cannot read the text file"},
      {model_arg() + " -f '" + empty + "'", "at least two are needed"},
      {model_arg() + " " + text_arg() + " --kv-policy uniform --kv-ratio 1.5", "--kv-ratio"},
      {model_arg() + " " + text_arg() + " --kv-policy uniform --kv-ratio 0", "ratio"},
      {model_arg() + " " + text_arg() + " --kv-memory 1GiB", "does not apply to perplexity"},
      {model_arg() + " " + text_arg() + " --max-running 2", "does not apply to perplexity"},
      {model_arg() + " " + text_arg() + " --chunk 0", "--chunk"},
      {model_arg() + " " + text_arg() + " -c 1", "at least 2 tokens"},
      {model_arg() + " " + text_arg() + " -c 100000", "exceeds the model's context"},
      {"-m /nonexistent.gguf " + text_arg(), "nonexistent"},
      {text_arg(), "--model"},
  };
  for (const Case& c : cases) {
    const auto r = run_tangram("perplexity " + c.args + " -t 1");
    EXPECT_NE(r.exit_code, 0) << c.args << "\n" << r.output;
    EXPECT_LT(r.exit_code, 128) << "crashed: " << c.args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, c.message)) << c.args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace tangram
