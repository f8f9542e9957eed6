// Runs tools/oracle/oracle.mjs (llama.cpp through node-llama-cpp) as a child process and
// returns its JSON answer, so tests can compare Tangram against an independent engine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace tangram::testing {

// Folder holding oracle.mjs: $TANGRAM_ORACLE_DIR, else <source>/tools/oracle.
std::string oracle_dir();

// Ok when node runs and node-llama-cpp is installed beside oracle.mjs; otherwise an Error
// that says how to install it (scripts/oracle-setup.sh).
Status oracle_ready();

// `node oracle.mjs <command> --model <model> --tokens <ids> --threads 2 <extra>`; the parsed
// JSON on success, an Error with the oracle's stderr otherwise.
Result<nlohmann::json> run_oracle(const std::string& command, const std::string& model,
                                  const std::vector<int32_t>& tokens, const std::string& extra);

}  // namespace tangram::testing
