// Helpers shared by the test suites.
#pragma once

#include <filesystem>
#include <string>

namespace tangram::testing {

// The repository's data/ (real models, vocabularies, templates, profiles), or
// $TANGRAM_DATA_DIR. Fails the calling test with a clear message (never skips) when the folder
// is missing.
std::filesystem::path data_dir();
// A file under data_dir(); fails the test if it does not exist.
std::filesystem::path data_file(const std::string& relative);
// A fresh, empty temporary directory unique to the running test. Removed with every other
// temp_path() of this process after the last test (kept when TANGRAM_KEEP_TEST_FILES=1).
std::filesystem::path temp_dir();
// A path in the temporary folder unique to this process, removed like temp_dir()'s.
std::filesystem::path temp_path(const std::string& name);
// Whole file as a string.
std::string read_file(const std::filesystem::path& p);

// Runs the tangram binary built with the tests (TANGRAM_BINARY) with `args` (shell words).
struct CommandRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};
CommandRun run_tangram(const std::string& args);

}  // namespace tangram::testing
