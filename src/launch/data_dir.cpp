#include "launch/data_dir.h"

#include <cstdlib>
#include <system_error>

#ifndef TANGRAM_SOURCE_DIR
#define TANGRAM_SOURCE_DIR "."
#endif

namespace tangram {

namespace fs = std::filesystem;

namespace {

// The running executable's folder (Linux: /proc/self/exe); empty when it cannot be read.
fs::path executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

}  // namespace

fs::path data_dir() {
  if (const char* e = std::getenv("TANGRAM_DATA_DIR"); e && *e) return e;
  if (const fs::path exe_dir = executable_dir(); !exe_dir.empty()) {
    const fs::path installed = exe_dir / ".." / "share" / "tangram";
    std::error_code ec;
    if (fs::is_directory(installed, ec)) return installed.lexically_normal();
  }
  return fs::path(TANGRAM_SOURCE_DIR) / "data";
}

std::vector<fs::path> calibration_folders() {
  return {data_dir() / "calibration", fs::path(TANGRAM_SOURCE_DIR) / "data" / "calibration"};
}

fs::path default_recall_set() {
  const fs::path relative = fs::path("eval") / "recall-heldout.jsonl";
  std::error_code ec;
  if (fs::exists(data_dir() / relative, ec)) return data_dir() / relative;
  return fs::path(TANGRAM_SOURCE_DIR) / "data" / relative;
}

fs::path oracle_dir() {
  if (const char* e = std::getenv("TANGRAM_ORACLE_DIR"); e && *e) return e;
  const fs::path candidates[] = {data_dir() / "oracle",
                                 fs::path(TANGRAM_SOURCE_DIR) / "tools" / "oracle"};
  std::error_code ec;
  for (const fs::path& dir : candidates)
    if (fs::is_directory(dir / "node_modules" / "node-llama-cpp", ec)) return dir;
  for (const fs::path& dir : candidates)
    if (fs::is_directory(dir, ec)) return dir;
  return candidates[1];
}

}  // namespace tangram
