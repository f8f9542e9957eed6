// The tangram policy without a hand-made profile: when it compresses (--kv-ratio < 1) and no
// --kv-profile is given, the model is profiled on first use from the calibration text shipped
// with tangram (profiler.h) and the profile is cached by the model's fingerprint
// (store/session_fingerprint.h) and the profiling settings; later starts reuse it.
//
// Cache folder: --profile-cache DIR, else $TANGRAM_PROFILE_CACHE, else
// $XDG_CACHE_HOME/tangram/profiles, else ~/.cache/tangram/profiles. A profile is
// <cache>/<model fingerprint>/<scorer>-<level>-<settings hash>.json, written to a temporary name
// and renamed, so a reader never sees half a file and two processes profiling at once both leave
// a whole one. A cache folder that cannot be written costs only the reuse: the profile is kept in
// a temporary file for this run, with a warning.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/engine_flags.h"
#include "common/result.h"
#include "engine/engine.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tangram::cli {

// True when the flags ask for the tangram policy's automatic profile: tangram compressing, no
// --kv-profile.
bool wants_auto_profile(const EngineFlags& flags);

// The folder of cached profiles for these flags (see above); never empty.
std::filesystem::path profile_cache_dir(const EngineFlags& flags);

// Where the profile came from, for --dry-run (nothing loaded): "none" (no profile used),
// "--kv-profile" with its path, or "auto" with the cache folder and the calibration folder.
nlohmann::json profile_source_json(const EngineFlags& flags);

// A profile file written for this process only (the cache could not be written): removed when
// this is destroyed, after the engine has read it.
class TemporaryFile {
 public:
  explicit TemporaryFile(std::filesystem::path path) : path_(std::move(path)) {}
  ~TemporaryFile();
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;

 private:
  std::filesystem::path path_;
};

struct ResolvedProfile {
  std::string path;    // the profile the engine loads; empty when none is used
  std::string origin;  // "none", "--kv-profile", "made", "reused" or "temporary"
  std::unique_ptr<TemporaryFile> temporary;  // keep alive until the engine is created
};

// The model's cached profile for the flags' scorer, level, sink and window, or a new one
// measured now (a progress bar on stderr) and cached; logs one line on stderr naming the file
// and whether it was made or reused. `model_path` names the model in the profile when it has no
// name. For a command that runs tangram whatever its flags' policy (bench).
Result<ResolvedProfile> automatic_profile(const EngineFlags& flags, Model& model,
                                          const Tokenizer& tok, const std::string& model_path);

// For the tangram policy with no --kv-profile (wants_auto_profile): automatic_profile(), and
// options' compression profile set to it. Otherwise leaves options as they are.
Result<ResolvedProfile> resolve_kv_profile(EngineOptions& options, const EngineFlags& flags,
                                           Model& model, const Tokenizer& tok,
                                           const std::string& model_path);

}  // namespace tangram::cli
