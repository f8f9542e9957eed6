#include "support/test_support.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <unistd.h>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace tangram::testing {

std::filesystem::path data_dir() {
  const char* env = std::getenv("TANGRAM_DATA_DIR");
  std::filesystem::path p =
      env && *env ? std::filesystem::path(env) : std::filesystem::path(TANGRAM_SHARED_DEFAULT);
  if (!std::filesystem::is_directory(p)) {
    ADD_FAILURE() << "test data folder not found at " << p
                  << " (the repository's data/, or TANGRAM_DATA_DIR)";
  }
  return p;
}

std::filesystem::path data_file(const std::string& relative) {
  auto p = data_dir() / relative;
  if (!std::filesystem::exists(p)) ADD_FAILURE() << "missing test data file: " << p;
  return p;
}

namespace {

// Every temporary folder this process made starts with this prefix (pid included, so suites
// running side by side under ctest -j never remove each other's folders).
std::string temp_prefix() { return "tangram-test-" + std::to_string(::getpid()) + "-"; }

// Removes this process's temporary folders when every test has run. Without it each run of the
// suites left its models and databases behind (hundreds of MiB per run, tens of GiB on a
// developer's machine). TANGRAM_KEEP_TEST_FILES=1 keeps them for a post-mortem.
class TempFolderCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    const char* keep = std::getenv("TANGRAM_KEEP_TEST_FILES");
    if (keep && *keep && std::string(keep) != "0") return;
    const std::string prefix = temp_prefix();
    std::error_code ec;
    std::vector<std::filesystem::path> ours;
    for (const auto& e :
         std::filesystem::directory_iterator(std::filesystem::temp_directory_path(), ec))
      if (e.path().filename().string().rfind(prefix, 0) == 0) ours.push_back(e.path());
    for (const auto& p : ours) std::filesystem::remove_all(p, ec);
  }
};

// Registered when this file is linked, i.e. by every suite that can call temp_dir().
[[maybe_unused]] ::testing::Environment* const kTempFolderCleanup =
    ::testing::AddGlobalTestEnvironment(new TempFolderCleanup);

}  // namespace

std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / (temp_prefix() + name);
}

std::filesystem::path temp_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "tangram";
  for (char& c : name)
    if (c == '/') c = '_';
  auto p = temp_path(name);
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CommandRun run_tangram(const std::string& args) {
  const std::string cmd = std::string("'") + TANGRAM_BINARY + "' " + args + " 2>&1";
  CommandRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

}  // namespace tangram::testing
