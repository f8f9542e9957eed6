// The per-head retention profiler behind `tangram profile` and the tangram policy's automatic
// profile (auto_profile.h): pilot samples of text run through the dynamic policy, each head its
// own page group, and each head's kept length recorded.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "common/result.h"
#include "compress/profile.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tangram::cli {

struct PilotSample {
  std::vector<int32_t> tokens;
  int kind = 0;  // which file (kind of text) it came from
};

// The calibration text shipped with tangram (data/calibration: narrative, dialogue, technical,
// code, instructions; one file per kind): <data_dir()>/calibration when it exists, else the
// source tree's data/calibration. Sorted by name; an error (naming --samples) when none is found.
Result<std::vector<std::filesystem::path>> calibration_files();

// The pilot samples of `files` (one kind of text each: JSON lines {"text": ...} or plain text
// split at lines "---"; one long text is cut into sample_tokens pieces), at most sample_tokens
// each, the kinds interleaved and capped at n_samples.
Result<std::vector<PilotSample>> read_pilot_samples(const std::vector<std::string>& files,
                                                    const Tokenizer& tok, int64_t sample_tokens,
                                                    int n_samples);

// Per-head retention [sample][layer * n_kv_head + head] after the first and after the last turn.
struct TurnRetention {
  std::vector<std::vector<double>> first_turn, last_turn;
};

struct MeasuredProfile {
  RetentionProfile profile;
  TurnRetention turns;
};

// Runs every sample as a conversation of opt.turns growing prefixes through the dynamic policy
// (opt's scorer, ratio, level, sink, window; at most the model's batch limit per step), with a
// progress bar, and returns the profile of the last turns. Needs at least 2 samples.
Result<MeasuredProfile> measure_profile(Model& model, const Tokenizer& tok,
                                        const std::vector<PilotSample>& samples,
                                        const ProfileOptions& opt);

}  // namespace tangram::cli
