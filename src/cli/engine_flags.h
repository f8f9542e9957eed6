// The engine settings (launch/engine_settings.h) as command-line flags, shared by every command
// that runs the engine (`run`, `chat`, `serve`, `perplexity`, the benchmarks).
#pragma once

#include <string>
#include <vector>

#include "launch/engine_settings.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace tangram::cli {

// Binds the engine flags (KV memory, page geometry, batching limits, KV compression) to `e`; its
// current values are the command's defaults. Returns the options added, for a command that passes
// them on to a child process (bench-serve --soak).
std::vector<CLI::Option*> add_engine_options(CLI::App* command, EngineSettings& e);

// --mmap, for the commands that load a model without the engine flags.
void add_mmap_flag(CLI::App* command, bool& mmap);

// The options of `options` given on the command line, as the words that would give them again.
std::vector<std::string> given_as_args(const std::vector<CLI::Option*>& options);

}  // namespace tangram::cli
