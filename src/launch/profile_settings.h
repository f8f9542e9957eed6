// The automatic profile's flags (profiling/auto_profile.h): --kv-policy tangram compressing with
// no --kv-profile asks for it; --profile-cache names its folder (else the default:
// $TANGRAM_PROFILE_CACHE, $XDG_CACHE_HOME/tangram/profiles or ~/.cache/tangram/profiles).
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "engine/engine.h"
#include "launch/engine_settings.h"
#include "model/model.h"
#include "profiling/auto_profile.h"
#include "tokenizer/tokenizer.h"

namespace tangram {

// True when the flags ask for the tangram policy's automatic profile: tangram compressing, no
// --kv-profile.
bool wants_auto_profile(const EngineSettings& flags);

// The folder of cached profiles for these flags (see above); never empty.
std::filesystem::path profile_cache_dir(const EngineSettings& flags);

// Where the profile came from, for --dry-run (nothing loaded): "none" (no profile used),
// "--kv-profile" with its path, or "auto" with the cache folder and the calibration folder.
nlohmann::json profile_source_json(const EngineSettings& flags);

// The model's cached profile for the flags' scorer, level, sink and window, or a new one
// measured now (a progress bar on stderr) and cached; logs one line on stderr naming the file
// and whether it was made or reused. `model_path` names the model in the profile when it has no
// name. For a command that runs tangram whatever its flags' policy (bench).
Result<ResolvedProfile> automatic_profile(const EngineSettings& flags, Model& model,
                                          const Tokenizer& tok, const std::string& model_path);

// For the tangram policy with no --kv-profile (wants_auto_profile): automatic_profile(), and
// options' compression profile set to it. Otherwise leaves options as they are.
Result<ResolvedProfile> resolve_kv_profile(EngineOptions& options, const EngineSettings& flags,
                                           Model& model, const Tokenizer& tok,
                                           const std::string& model_path);

}  // namespace tangram
