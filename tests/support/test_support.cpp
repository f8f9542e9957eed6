#include "support/test_support.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <unistd.h>
#include <sstream>

namespace tangram::testing {

std::filesystem::path shared_dir() {
  const char* env = std::getenv("TANGRAM_SHARED_DIR");
  std::filesystem::path p = env && *env ? std::filesystem::path(env)
                                        : std::filesystem::path(TANGRAM_SHARED_DEFAULT);
  if (!std::filesystem::is_directory(p)) {
    ADD_FAILURE() << "shared/ folder not found at " << p
                  << ": it must sit beside the repository root (or set TANGRAM_SHARED_DIR)";
  }
  return p;
}

std::filesystem::path shared_file(const std::string& relative) {
  auto p = shared_dir() / relative;
  if (!std::filesystem::exists(p)) ADD_FAILURE() << "missing shared file: " << p;
  return p;
}

std::filesystem::path temp_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "tangram";
  for (char& c : name)
    if (c == '/') c = '_';
  auto p = std::filesystem::temp_directory_path() / ("tangram-test-" + std::to_string(::getpid()) + "-" + name);
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
