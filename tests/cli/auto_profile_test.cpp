// The tangram policy without --kv-profile (src/launch/profile_settings.h over
// src/profiling/auto_profile.h), through the tangram binary on the real stories260K model and a
// generated one: the first start profiles the model from the shipped calibration text and writes
// the cache; later starts reuse the file without profiling; another model gets its own; an
// unwritable cache costs only the reuse.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace tangram {
namespace {

namespace fs = std::filesystem;
using testing::run_tangram;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string quoted(const fs::path& p) {
  std::string s(1, '\'');
  s += p.string();
  s += '\'';
  return s;
}

// Every profile file under the cache, sorted.
std::vector<fs::path> cached_profiles(const fs::path& cache) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(cache, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file()) out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

// `tangram serve ARGS --port 0` until it prints "listening on" (or exits), then SIGTERM; returns
// its exit code and its output.
testing::CommandRun serve_until_listening(const std::string& args, const fs::path& dir) {
  const fs::path log = dir / "serve.log", script = dir / "serve.sh";
  std::ofstream(script) << "'" << TANGRAM_BINARY << "' serve " << args << " --port 0 >"
                        << quoted(log) << " 2>&1 &\npid=$!\n"
                        << "for _ in $(seq 1 1200); do grep -q '^listening on' " << quoted(log)
                        << " && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done\n"
                        << "kill -TERM $pid 2>/dev/null\nwait $pid\n";
  testing::CommandRun r;
  const int status = std::system(("bash " + quoted(script)).c_str());
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  r.output = testing::read_file(log);
  return r;
}

TEST(AutoProfile, FirstStartProfilesLaterStartsReuseAnotherModelGetsItsOwn) {
  const fs::path dir = testing::temp_dir();
  const fs::path cache = dir / "profiles";
  const std::string stories = quoted(testing::data_file("models/stories260K/stories260K.gguf"));
  const std::string tangram =
      " -t 1 --kv-memory 64MiB --kv-policy tangram --kv-ratio 0.5 --profile-cache " + quoted(cache);

  // First serve on a fresh cache: profiled from the calibration text, the file written.
  auto r = serve_until_listening("-m " + stories + tangram, dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "listening on")) << r.output;
  EXPECT_TRUE(contains(r.output, "profiling it on the calibration text in")) << r.output;
  EXPECT_TRUE(contains(r.output, "(made in")) << r.output;
  const std::vector<fs::path> first = cached_profiles(cache);
  ASSERT_EQ(first.size(), 1u) << r.output;
  const std::string content = testing::read_file(first[0]);
  EXPECT_TRUE(contains(content, "tangram-profile-json/v1"));
  const auto written = fs::last_write_time(first[0]);

  // Second start: the same file reused, nothing profiled or rewritten.
  r = serve_until_listening("-m " + stories + tangram, dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "KV profile " + first[0].string() + " (reused")) << r.output;
  EXPECT_FALSE(contains(r.output, "profiling")) << r.output;
  EXPECT_EQ(cached_profiles(cache), first);
  EXPECT_EQ(testing::read_file(first[0]), content);
  EXPECT_EQ(fs::last_write_time(first[0]), written);

  // Another model (a generated one) gets its own profile beside the first; `run` resolves it the
  // same way and generates under it.
  const fs::path other = dir / "other.gguf";
  r = run_tangram("mkmodel --preset tiny-qwen3 --layers 2 --seed 4 -o " + quoted(other));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_tangram("run -m " + quoted(other) + " -p hello -n 4 --temp 0" + tangram);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "(made in")) << r.output;
  const std::vector<fs::path> both = cached_profiles(cache);
  ASSERT_EQ(both.size(), 2u) << r.output;
  EXPECT_NE(both[0].parent_path(), both[1].parent_path()) << "one folder per model fingerprint";
  EXPECT_EQ(testing::read_file(first[0]), content);
}

TEST(AutoProfile, UnwritableCacheProfilesForThisRunOnly) {
  const fs::path dir = testing::temp_dir();
  const fs::path blocker = dir / "not-a-folder";
  std::ofstream(blocker) << "a file where the cache folder would go\n";
  const std::string stories = quoted(testing::data_file("models/stories260K/stories260K.gguf"));
  // The profile for this run only goes to a temporary file, removed when the run ends.
  const auto temporary_profiles = [] {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(fs::temp_directory_path()))
      if (e.path().filename().string().rfind("tangram-profile-", 0) == 0) ++n;
    return n;
  };
  const size_t before = temporary_profiles();
  const auto r = run_tangram("run -m " + stories +
                             " -p 'Once upon a time' -n 4 --temp 0 -t 1 --kv-memory 64MiB "
                             "--kv-policy tangram --kv-ratio 0.5 --profile-cache " +
                             quoted(blocker / "profiles"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "warning: cannot write the profile cache")) << r.output;
  EXPECT_TRUE(contains(r.output, "--profile-cache")) << r.output;
  EXPECT_TRUE(contains(r.output, "Once upon a time")) << r.output;
  EXPECT_EQ(temporary_profiles(), before);
}

TEST(AutoProfile, DryRunShowsWhereTheProfileComesFrom) {
  const std::string stories = quoted(testing::data_file("models/stories260K/stories260K.gguf"));
  const auto source = [&](const std::string& flags) {
    const auto r = run_tangram("serve -m " + stories + " " + flags + " --dry-run");
    EXPECT_EQ(r.exit_code, 0) << flags << ": " << r.output;
    const auto j = nlohmann::json::parse(r.output, nullptr, false);
    return j.is_discarded() ? nlohmann::json()
                            : j["config"]["engine"]["compression"]["profile_source"];
  };
  const nlohmann::json automatic =
      source("--kv-policy tangram --kv-ratio 0.3 --profile-cache /somewhere/else");
  EXPECT_EQ(automatic["source"], "auto") << automatic.dump();
  EXPECT_EQ(automatic["cache"], "/somewhere/else");
  EXPECT_TRUE(fs::exists(fs::path(automatic["calibration"].get<std::string>()) / "narrative.txt"))
      << automatic.dump();
  EXPECT_EQ(source("--kv-policy tangram --kv-ratio 0.3 --kv-profile " + stories)["source"],
            "--kv-profile");
  EXPECT_EQ(source("--kv-policy tangram")["source"], "none");  // ratio 1: nothing compressed
  EXPECT_EQ(source("")["source"], "none");

  // `tangram profile` without --samples reads the same calibration text: its five kinds.
  const auto r = run_tangram("profile -m " + stories + " --dry-run");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto samples = nlohmann::json::parse(r.output)["config"]["samples"];
  ASSERT_EQ(samples.size(), 5u) << r.output;
  EXPECT_EQ(fs::path(samples[0].get<std::string>()).parent_path(),
            fs::path(automatic["calibration"].get<std::string>()));
}

}  // namespace
}  // namespace tangram
