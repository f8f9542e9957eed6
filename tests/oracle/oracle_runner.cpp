#include "oracle/oracle_runner.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "support/test_support.h"

namespace tangram::testing {
namespace {

constexpr const char* kSetupHint =
    "install the llama.cpp oracle with scripts/oracle-setup.sh (see tools/oracle/README.md)";

// Single-quoted for /bin/sh; paths here come from the test itself.
std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs `cmd` through the shell; stdout in `out`, the exit status as returned.
int run_capture(const std::string& cmd, std::string& out) {
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return -1;
  std::array<char, 65536> buf{};
  size_t got = 0;
  while ((got = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), got);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

std::string oracle_dir() {
  if (const char* env = std::getenv("TANGRAM_ORACLE_DIR"); env != nullptr && *env != '\0')
    return env;
  return std::string(TANGRAM_SOURCE_DIR) + "/tools/oracle";
}

Status oracle_ready() {
  const std::filesystem::path dir = oracle_dir();
  if (!std::filesystem::exists(dir / "oracle.mjs"))
    return make_error("oracle.mjs not found in {}; {}", dir.string(), kSetupHint);
  std::string version;
  if (run_capture("node --version 2>/dev/null", version) != 0)
    return make_error("node is not installed or does not run; {}", kSetupHint);
  if (!std::filesystem::exists(dir / "node_modules" / "node-llama-cpp" / "package.json"))
    return make_error("{} has no node_modules/node-llama-cpp; {}", dir.string(), kSetupHint);
  return Status{};
}

Result<nlohmann::json> run_oracle(const std::string& command, const std::string& model,
                                  const std::vector<int32_t>& tokens, const std::string& extra) {
  TG_TRY(oracle_ready());
  // Not under temp_dir(): that call empties the test's folder, which holds the model.
  const std::filesystem::path err_file =
      std::filesystem::temp_directory_path() /
      fmt::format("tangram-oracle-stderr-{}.txt", static_cast<long>(::getpid()));
  const std::string cmd = fmt::format(
      "node {} {} --model {} --tokens {} --threads 2 {} 2>{}",
      shell_quote((std::filesystem::path(oracle_dir()) / "oracle.mjs").string()), command,
      shell_quote(model), fmt::join(tokens, ","), extra, shell_quote(err_file.string()));
  std::string out;
  const int rc = run_capture(cmd, out);
  const std::string err = read_file(err_file);
  std::filesystem::remove(err_file);
  if (rc != 0) return make_error("oracle exited with {}: {}", rc, err);
  auto j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return make_error("oracle printed invalid JSON: {}", out.substr(0, 200));
  return j;
}

}  // namespace tangram::testing
