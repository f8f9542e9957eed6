// Helpers shared by the test suites.
#pragma once

#include <filesystem>
#include <string>

namespace tangram::testing {

// ../shared beside the repository root, or $TANGRAM_SHARED_DIR. Fails the calling test with a
// clear message (never skips) when the folder is missing.
std::filesystem::path shared_dir();
// A file under shared_dir(); fails the test if it does not exist.
std::filesystem::path shared_file(const std::string& relative);
// A fresh, empty temporary directory unique to the running test.
std::filesystem::path temp_dir();
// Whole file as a string.
std::string read_file(const std::filesystem::path& p);

// Runs the tangram binary built with the tests (TANGRAM_BINARY) with `args` (shell words).
struct CommandRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};
CommandRun run_tangram(const std::string& args);

}  // namespace tangram::testing
