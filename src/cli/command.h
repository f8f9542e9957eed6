// A `tangram` subcommand as main() sees it. Each cmd_*.cpp declares its own options in a
// register_<name>() next to its implementation; main() only registers them, parses, and calls
// the one that was given.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/result.h"

namespace tangram::cli {

struct Command {
  CLI::App* app = nullptr;   // the subcommand, owned by the parent CLI::App
  std::function<int()> run;  // runs it with the parsed options; the process exit code
  // The resolved configuration with nothing loaded, printed by --dry-run (config_json.h); an
  // error is the one the command would stop with. Empty: the command cannot describe it yet.
  std::function<Result<nlohmann::json>()> plan;
};

Command register_info(CLI::App& app);
Command register_tokenize(CLI::App& app);
Command register_run(CLI::App& app);
Command register_chat(CLI::App& app);
Command register_serve(CLI::App& app);
Command register_bench(CLI::App& app);
Command register_bench_serve(CLI::App& app);
Command register_profile(CLI::App& app);
Command register_mkmodel(CLI::App& app);
Command register_bench_model(CLI::App& app);
Command register_cluster(CLI::App& app);
Command register_perplexity(CLI::App& app);
Command register_recall(CLI::App& app);

}  // namespace tangram::cli
