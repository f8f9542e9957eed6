// The sampling flags of the commands that generate text (run, chat, serve).
#pragma once

#include "runtime/sampling_params.h"

namespace CLI {
class App;
}

namespace tangram::cli {

// Binds --temp, --top-k, --top-p, --min-p, the penalties, --seed, --stop and --ignore-eos to `s`;
// its current values are the command's defaults.
void add_sampling_options(CLI::App* command, SamplingParams& s);

}  // namespace tangram::cli
