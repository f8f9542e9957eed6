// `tangram bench-serve --quick` end to end: an in-process `tangram serve` driven over HTTP by the
// load generator at two rates with session reuse on and off, and a report whose figures agree.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace tangram {
namespace {

using Ran = testing::CommandRun;

Ran run_binary(const std::string& args) { return testing::run_tangram(args); }

TEST(CliBenchServe, HelpNamesTheOptions) {
  const auto r = run_binary("bench-serve --help");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* opt : {"--url", "--rates", "--workload", "--quick", "--api-key", "--kv-memory",
                          "--soak", "--soak-restart-every", "--soak-sample", "--soak-rss-growth"})
    EXPECT_NE(r.output.find(opt), std::string::npos) << opt;
}

TEST(CliBenchServe, QuickRunReportsBothModesAtEveryRate) {
  const auto dir = testing::temp_dir();
  const auto model = (dir / "serve.gguf").string();
  auto r = run_binary("mkmodel --preset tiny-qwen3 --ctx 2048 --seed 9 -o '" + model + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto out = dir / "bench-serve-out";
  r = run_binary("bench-serve --quick -m '" + model + "' --rates 1,4 --kv-memory 64MiB -o '" +
                 out.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Gain from session reuse"), std::string::npos) << r.output;
  for (const char* f : {"report.json", "report.md", "ttft_vs_rate.svg", "throughput_vs_rate.svg"})
    EXPECT_TRUE(std::filesystem::exists(out / f)) << f;
  const auto j = nlohmann::json::parse(testing::read_file(out / "report.json"), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  const int64_t planned = j["workload"]["planned_requests_per_run"].get<int64_t>();
  EXPECT_EQ(planned,
            j["workload"]["sessions"].get<int64_t>() * j["workload"]["turns"].get<int64_t>());
  ASSERT_GE(j["workload"]["turns"].get<int64_t>(), 2) << "reuse needs a second turn";

  std::map<double, std::map<std::string, int>> modes;  // rate -> reuse -> runs
  for (const auto& run : j["runs"]) {
    const double rate = run["rate"].get<double>();
    const std::string reuse = run["reuse"].get<std::string>();
    ++modes[rate][reuse];
    SCOPED_TRACE(run["rate"].dump() + " " + reuse);
    // Counts add up: every planned turn was sent, every sent one completed.
    EXPECT_EQ(run["planned"].get<int64_t>(), planned);
    EXPECT_EQ(run["sent"].get<int64_t>() + run["skipped"].get<int64_t>(), planned);
    EXPECT_EQ(run["errors"].get<int64_t>(), 0);
    EXPECT_EQ(run["skipped"].get<int64_t>(), 0);
    EXPECT_EQ(run["completed"].get<int64_t>(), planned);
    EXPECT_EQ(static_cast<int64_t>(run["requests"].size()), planned);
    EXPECT_EQ(run["metrics"]["completed"].get<int64_t>(), planned);
    EXPECT_GT(run["metrics"]["output_tokens_per_s"].get<double>(), 0.0);
    EXPECT_TRUE(run["metrics"]["ttft_s"]["p50"].is_number());
    int64_t by_turn_requests = 0;
    for (const auto& t : run["by_turn"]) {
      by_turn_requests += t["requests"].get<int64_t>();
      const int64_t cached = t["cached_tokens"].get<int64_t>();
      EXPECT_LE(cached, t["prompt_tokens"].get<int64_t>());
      if (reuse == "off" || t["turn"].get<int>() == 0)
        EXPECT_EQ(cached, 0) << "turn " << t["turn"];
      else
        EXPECT_GT(cached, 0) << "turn " << t["turn"];
    }
    EXPECT_EQ(by_turn_requests, planned);
    EXPECT_EQ(run["engine"]["preemptions"].get<int64_t>(), 0);
    for (const auto& q : run["requests"]) {
      EXPECT_EQ(q["status"].get<int>(), 200);
      EXPECT_LE(q["submit_s"].get<double>(), q["first_token_s"].get<double>());
      EXPECT_LE(q["first_token_s"].get<double>(), q["finish_s"].get<double>());
    }
  }
  ASSERT_EQ(modes.size(), 2u);
  for (const auto& [rate, m] : modes) {
    EXPECT_EQ(m.at("on"), 1) << rate;
    EXPECT_EQ(m.at("off"), 1) << rate;
  }
  // At each rate the engine prefilled fewer tokens with reuse on: what it served from cache it
  // did not compute again.
  for (const auto& [rate, m] : modes) {
    int64_t prefill_on = -1, prefill_off = -1, cached_on = 0;
    for (const auto& run : j["runs"]) {
      if (run["rate"].get<double>() != rate) continue;
      const int64_t p = run["engine"]["prefill_tokens"].get<int64_t>();
      if (run["reuse"] == "on") {
        prefill_on = p;
        cached_on = run["metrics"]["cached_tokens"].get<int64_t>();
      } else {
        prefill_off = p;
      }
    }
    EXPECT_GT(cached_on, 0) << rate;
    EXPECT_LT(prefill_on, prefill_off) << rate;
  }
  EXPECT_EQ(j["ratios_on_over_off"].size(), 2u);
  EXPECT_NE(testing::read_file(out / "report.md").find("| on |"), std::string::npos);
}

TEST(CliBenchServe, BadInputGivesCleanErrors) {
  auto r = run_binary("bench-serve --url ftp://nowhere --quick");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--url"), std::string::npos) << r.output;
  r = run_binary("bench-serve --url http://127.0.0.1:1 --quick");  // nothing listens there
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("cannot use the server at http://127.0.0.1:1"), std::string::npos)
      << r.output;
  r = run_binary("bench-serve --workload nope --quick");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  // The in-process server's flags do not reach a --url server: refused, not ignored.
  for (const char* flag : {"--kv-memory 64MiB", "--max-queue 3"}) {
    r = run_binary(std::string("bench-serve --url http://127.0.0.1:1 --quick ") + flag);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("with --url, start the server with it"), std::string::npos)
        << flag << ": " << r.output;
  }
}

}  // namespace
}  // namespace tangram
