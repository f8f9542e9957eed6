// The `tangram` subcommands. main.cpp parses the command line (CLI11 lives only there, it is
// slow to compile) into these option structs; each command lives in its own cmd_*.cpp.
#pragma once

#include <string>
#include <vector>

namespace tangram::cli {

struct InfoOptions {
  std::string model;
  bool full = false;  // every metadata item and tensor, unabridged
};
int cmd_info(const InfoOptions& opt);

}  // namespace tangram::cli
