#include "launch/profile_settings.h"

#include "launch/data_dir.h"

namespace tangram {

namespace fs = std::filesystem;

bool wants_auto_profile(const EngineSettings& flags) {
  return flags.kv_policy == "tangram" && flags.kv_ratio < 1.0 && flags.kv_profile.empty();
}

fs::path profile_cache_dir(const EngineSettings& flags) {
  if (!flags.profile_cache.empty()) return flags.profile_cache;
  return default_profile_cache_dir();
}

nlohmann::json profile_source_json(const EngineSettings& flags) {
  nlohmann::json j{{"cache", profile_cache_dir(flags).string()}};
  if (wants_auto_profile(flags)) {
    j["source"] = "auto";
    auto files = calibration_files(calibration_folders());
    j["calibration"] = files ? files->front().parent_path().string() : files.message();
  } else if (!flags.kv_profile.empty() && flags.kv_policy == "tangram") {
    j["source"] = "--kv-profile";
  } else {
    j["source"] = "none";
  }
  return j;
}

Result<ResolvedProfile> automatic_profile(const EngineSettings& flags, Model& model,
                                          const Tokenizer& tok, const std::string& model_path) {
  AutoProfileRequest request;
  TG_ASSIGN(request.calibration, calibration_files(calibration_folders()));
  request.settings = auto_profile_settings(model, flags.kv_scorer, flags.kv_level, flags.kv_sink,
                                           flags.kv_window, flags.threads, model_path);
  request.cache_dir = profile_cache_dir(flags);
  return tangram::automatic_profile(request, model, tok);
}

Result<ResolvedProfile> resolve_kv_profile(EngineOptions& options, const EngineSettings& flags,
                                           Model& model, const Tokenizer& tok,
                                           const std::string& model_path) {
  CompressionOptions& c = options.scheduler.compression;
  if (!wants_auto_profile(flags)) {
    ResolvedProfile given;
    given.path = c.profile;
    given.origin = c.profile.empty() ? "none" : "--kv-profile";
    return given;
  }
  TG_ASSIGN(ResolvedProfile resolved, automatic_profile(flags, model, tok, model_path));
  c.profile = resolved.path;
  return resolved;
}

}  // namespace tangram
