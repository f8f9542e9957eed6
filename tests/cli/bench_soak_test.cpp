// `tangram bench-serve --soak` end to end, briefly: a real `tangram serve` child on the
// stories260K model driven for 20 s with restarts. The test checks the report's structure and
// that its verdict, its checks, its verdict line and the exit code agree; how many requests fit
// in 20 s on a busy machine is not its business.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace tangram {
namespace {

TEST(CliBenchSoak, ShortSoakReportsOutcomesMemoryAndAnHonestVerdict) {
  const auto model = testing::data_file("models/stories260K/stories260K.gguf");
  const auto out = testing::temp_dir() / "soak-out";
  const auto r =
      testing::run_tangram("bench-serve --soak 20s -m '" + model.string() +
                           "' --conversations 3 --turns 3 --soak-restart-every 6s --soak-sample 1s "
                           "--kv-memory 64MiB --max-running 4 -t 1 --timeout 30 -o '" +
                           out.string() + "'");
  for (const char* f : {"report.json", "report.md", "soak.svg", "server.log"})
    ASSERT_TRUE(std::filesystem::exists(out / f)) << f << "\n" << r.output;
  const auto j = nlohmann::json::parse(testing::read_file(out / "report.json"), nullptr, false);
  ASSERT_FALSE(j.is_discarded());

  // The verdict is the conjunction of the checks, and the exit code and the last line say it.
  const std::string verdict = j["verdict"].get<std::string>();
  ASSERT_TRUE(verdict == "PASS" || verdict == "FAIL") << verdict;
  std::set<std::string> names;
  bool all = true;
  for (const auto& c : j["checks"]) {
    names.insert(c["check"].get<std::string>());
    all = all && c["pass"].get<bool>();
    EXPECT_FALSE(c["detail"].get<std::string>().empty());
  }
  EXPECT_EQ(names, (std::set<std::string>{"no 5xx", "no crash", "must-fail requests refused",
                                          "KV pages back to baseline", "nothing in flight",
                                          "RSS growth within bound"}));
  EXPECT_EQ(verdict == "PASS", all);
  EXPECT_EQ(r.exit_code, all ? 0 : 1) << r.output;
  EXPECT_NE(r.output.find("soak verdict: " + verdict), std::string::npos) << r.output;
  EXPECT_EQ(j["checks"][0]["pass"].get<bool>(),
            j["requests"]["by_outcome"]["5xx"].get<int64_t>() == 0);

  // Requests: every kind of the mix has its row, the outcomes add up, and chats were answered.
  const auto& req = j["requests"];
  int64_t sum = 0;
  for (const char* o : {"2xx", "4xx", "5xx", "connection_error"})
    sum += req["by_outcome"][o].get<int64_t>();
  EXPECT_EQ(sum, req["total"].get<int64_t>());
  for (const char* a : {"chat_stream", "chat", "disconnect_mid_stream", "stream_deleted_mid_turn",
                        "delete_mid_turn", "delete_session", "too_long_prompt", "malformed_body"})
    EXPECT_TRUE(req["by_action"].contains(a)) << a;
  EXPECT_GT(req["by_outcome"]["2xx"].get<int64_t>(), 0);
  EXPECT_GT(j["throughput"]["turns_completed"].get<int64_t>(), 0);

  // Restarts were made (SIGTERM first, then a kill -9), and the server came back each time.
  ASSERT_GE(j["restarts"].size(), 1u);
  EXPECT_EQ(j["restarts"][0]["signal"], "SIGTERM");
  if (j["restarts"].size() >= 2) {
    EXPECT_EQ(j["restarts"][1]["signal"], "SIGKILL");
  }

  // Memory: samples of RSS and KV pages, and the end's figures after deleting everything.
  ASSERT_GE(j["samples"].size(), 2u);
  EXPECT_GT(j["rss"]["first_bytes"].get<int64_t>(), 0);
  EXPECT_GE(j["rss"]["max_bytes"].get<int64_t>(), j["rss"]["first_bytes"].get<int64_t>());
  EXPECT_GT(j["kv_pages"]["total"].get<double>(), 0);
  EXPECT_TRUE(j["end"]["after_delete"].contains("kv_pages_used"));
  EXPECT_TRUE(j["end"]["after_delete"].contains("http_requests_inflight"));

  const std::string svg = testing::read_file(out / "soak.svg");
  for (const char* s : {"RSS (MiB)", "KV pages used (pages)", "time since the start (s)"})
    EXPECT_NE(svg.find(s), std::string::npos) << s;
  EXPECT_NE(testing::read_file(out / "report.md").find("soak verdict: " + verdict),
            std::string::npos);
}

TEST(CliBenchSoak, FlagsThatDoNotApplyAreRefused) {
  auto r = testing::run_tangram("bench-serve --soak 10s --rates 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--rates does not apply to --soak"), std::string::npos) << r.output;
  r = testing::run_tangram("bench-serve --soak 10s --url http://127.0.0.1:1");
  EXPECT_NE(r.output.find("--url does not apply to --soak"), std::string::npos) << r.output;
  r = testing::run_tangram("bench-serve --soak-sample 1s");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--soak-sample needs --soak"), std::string::npos) << r.output;
  r = testing::run_tangram("bench-serve --soak 10parsecs");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("unknown unit of time"), std::string::npos) << r.output;
  r = testing::run_tangram("bench-serve --soak 2s");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("at least 5s"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace tangram
