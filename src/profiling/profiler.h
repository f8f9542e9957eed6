// The per-head retention profiler behind `tangram profile` and the tangram policy's automatic
// profile (auto_profile.h): pilot samples of text run through the dynamic policy, each head its
// own page group, and each head's kept length recorded.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/result.h"
#include "compress/profile.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tangram {

// What a profile measures: the dynamic policy's scorer, ratio, level, sink and window, on how
// many samples of how many tokens, over how many turns.
struct ProfilerSettings {
  std::string model_name;  // names the model in the profile when its file has no general.name
  std::string scorer = "keydiff";
  double ratio = 0.3;
  std::string level = "per-layer";  // per-layer | cross-layer
  int n_samples = 50;
  int64_t sample_tokens = 1024;  // longest sample (longer text is cut)
  int turns = 2;                 // growing prefixes of a sample, one turn each
  int sink = 4;
  int window = 32;
  int threads = 0;  // 0: the machine's cores
};

struct PilotSample {
  std::vector<int32_t> tokens;
  int kind = 0;  // which file (kind of text) it came from
};

// The calibration text shipped with tangram (data/calibration: narrative, dialogue, technical,
// code, instructions; one file per kind): the .txt files of the first of `folders` that has
// any, sorted by name; an error naming the folders (and --samples) when none has.
Result<std::vector<std::filesystem::path>> calibration_files(
    const std::vector<std::filesystem::path>& folders);

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
                                        const ProfilerSettings& opt);

}  // namespace tangram
