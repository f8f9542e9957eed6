// The tangram policy's automatic profile: a model without a hand-made profile is profiled on
// first use from the calibration text shipped with tangram (profiler.h), and the profile is cached
// by the model's fingerprint (store/session_fingerprint.h) and the profiling settings; later
// starts reuse it.
//
// A profile is <cache>/<model fingerprint>/<scorer>-<level>-<settings hash>.json, written to a
// temporary name and renamed, so a reader never sees half a file and two processes profiling at
// once both leave a whole one. A cache folder that cannot be written costs only the reuse: the
// profile is kept in a temporary file for this run, with a warning.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "model/model.h"
#include "profiling/profiler.h"
#include "tokenizer/tokenizer.h"

namespace tangram {

// The automatic profile's settings for a model: the calibration text's 50 samples (ten of each
// kind) of up to 256 tokens, two turns each, at the base ratio the shipped profiles were
// measured at, with the engine's scorer, level, sink and window.
ProfilerSettings auto_profile_settings(const Model& model, const std::string& scorer,
                                       const std::string& level, int sink, int window, int threads,
                                       const std::string& model_name);

// The default folder of cached profiles: $TANGRAM_PROFILE_CACHE, else
// $XDG_CACHE_HOME/tangram/profiles, else ~/.cache/tangram/profiles.
std::filesystem::path default_profile_cache_dir();

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

struct AutoProfileRequest {
  ProfilerSettings settings;                       // auto_profile_settings() for the engine's
  std::filesystem::path cache_dir;                 // default_profile_cache_dir() or the user's
  std::vector<std::filesystem::path> calibration;  // calibration_files()
};

// The model's cached profile for the request's settings and calibration text, or a new one
// measured now (a progress bar on stderr) and cached; logs one line on stderr naming the file
// and whether it was made or reused.
Result<ResolvedProfile> automatic_profile(const AutoProfileRequest& request, Model& model,
                                          const Tokenizer& tok);

}  // namespace tangram
