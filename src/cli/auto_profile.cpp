#include "cli/auto_profile.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <system_error>

#include <fmt/format.h>

#include "cli/profiler.h"
#include "compress/profile.h"
#include "store/session_fingerprint.h"

namespace tangram::cli {

namespace fs = std::filesystem;

namespace {

// What the automatic profile measures: the calibration text's 50 samples (ten of each kind) of
// up to 256 tokens, two turns each, with the engine's scorer, sink and window at the base ratio
// the shipped profiles were measured at. About 12.8k tokens of prefill: a second for stories260K,
// tens of minutes for an 8B model on 2 cores (docs/reference.md).
constexpr int kAutoSamples = 50;
constexpr int64_t kAutoSampleTokens = 256;

ProfileOptions auto_profile_options(const EngineFlags& flags, const Model& model,
                                    const std::string& model_path) {
  ProfileOptions p;
  p.model = model_path;
  p.scorer = flags.kv_scorer;
  p.level = flags.kv_level == "cross-layer" ? "cross-layer" : "per-layer";
  p.n_samples = kAutoSamples;
  p.sample_tokens = std::clamp<int64_t>(model.config().context_length - 8, 16, kAutoSampleTokens);
  p.turns = 2;
  p.sink = flags.kv_sink;
  p.window = flags.kv_window;
  p.threads = flags.threads;
  return p;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// <cache>/<model fingerprint>/<scorer>-<level>-<hash of the settings and the calibration
// text>.json: another model, scorer, level, sink, window or calibration text gets another file.
fs::path cached_profile_path(const fs::path& cache, const Model& model, const ProfileOptions& p,
                             const std::vector<fs::path>& calibration) {
  std::string settings = fmt::format("{} {} {} {} {} {} {} {}", p.scorer, p.level, p.ratio, p.sink,
                                     p.window, p.n_samples, p.sample_tokens, p.turns);
  for (const fs::path& f : calibration) settings += f.filename().string() + '\n' + read_bytes(f);
  const uint64_t settings_hash = bytes_fingerprint(settings);
  return cache / fmt::format("{:016x}", model_fingerprint(model.gguf())) /
         fmt::format("{}-{}-{:08x}.json", p.scorer, p.level, settings_hash & 0xffffffffu);
}

// The cached profile when it loads and fits the model; a file that does not is re-made.
bool usable_cached_profile(const fs::path& path, const ModelConfig& cfg) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return false;
  auto cached = load_profile(path.string());
  if (cached && cached->n_layers == cfg.n_layers && cached->n_kv_head == cfg.n_kv_head) return true;
  fmt::print(stderr, "tangram: the cached profile {} is not usable ({}); profiling again\n",
             path.string(), cached ? "another shape" : cached.message());
  return false;
}

// Writes the profile under a temporary name beside `path` and renames it into place.
Status save_profile_atomically(const RetentionProfile& prof, const fs::path& path) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return make_error("cannot create {}: {}", path.parent_path().string(), ec.message());
  const fs::path partial = path.string() + fmt::format(".partial-{}", ::getpid());
  if (Status st = save_profile(prof, partial.string()); !st) {
    fs::remove(partial, ec);
    return st;
  }
  fs::rename(partial, path, ec);
  if (ec) {
    fs::remove(partial, ec);
    return make_error("cannot move the profile into {}: {}", path.string(), ec.message());
  }
  return Status::Ok();
}

std::filesystem::path home_cache() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x);
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache";
  return fs::temp_directory_path();
}

}  // namespace

TemporaryFile::~TemporaryFile() {
  std::error_code ec;
  fs::remove(path_, ec);
}

bool wants_auto_profile(const EngineFlags& flags) {
  return flags.kv_policy == "tangram" && flags.kv_ratio < 1.0 && flags.kv_profile.empty();
}

fs::path profile_cache_dir(const EngineFlags& flags) {
  if (!flags.profile_cache.empty()) return flags.profile_cache;
  if (const char* e = std::getenv("TANGRAM_PROFILE_CACHE"); e && *e) return e;
  return home_cache() / "tangram" / "profiles";
}

nlohmann::json profile_source_json(const EngineFlags& flags) {
  nlohmann::json j{{"cache", profile_cache_dir(flags).string()}};
  if (wants_auto_profile(flags)) {
    j["source"] = "auto";
    auto files = calibration_files();
    j["calibration"] = files ? files->front().parent_path().string() : files.message();
  } else if (!flags.kv_profile.empty() && flags.kv_policy == "tangram") {
    j["source"] = "--kv-profile";
  } else {
    j["source"] = "none";
  }
  return j;
}

Result<ResolvedProfile> automatic_profile(const EngineFlags& flags, Model& model,
                                          const Tokenizer& tok, const std::string& model_path) {
  TG_ASSIGN(std::vector<fs::path> calibration, calibration_files());
  const ProfileOptions p = auto_profile_options(flags, model, model_path);
  const fs::path path = cached_profile_path(profile_cache_dir(flags), model, p, calibration);
  ResolvedProfile out;
  if (usable_cached_profile(path, model.config())) {
    fmt::print(stderr, "tangram: KV profile {} (reused: made earlier for this model)\n",
               path.string());
    out.path = path.string();
    out.origin = "reused";
    return out;
  }
  fmt::print(stderr,
             "tangram: no KV profile for this model yet: profiling it on the calibration "
             "text in {}, {} samples of up to {} tokens; this happens once per model\n",
             calibration.front().parent_path().string(), p.n_samples, p.sample_tokens);
  std::vector<std::string> files;
  for (const fs::path& f : calibration) files.push_back(f.string());
  TG_ASSIGN(std::vector<PilotSample> samples,
            read_pilot_samples(files, tok, p.sample_tokens, p.n_samples));
  const auto start = std::chrono::steady_clock::now();
  TG_ASSIGN(MeasuredProfile measured, measure_profile(model, tok, samples, p));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const Status saved = save_profile_atomically(measured.profile, path);
  if (saved) {
    fmt::print(stderr, "tangram: KV profile {} (made in {:.1f}s, reused by later starts)\n",
               path.string(), seconds);
    out.path = path.string();
    out.origin = "made";
    return out;
  }
  const fs::path temporary =
      fs::temp_directory_path() /
      fmt::format("tangram-profile-{}-{}", ::getpid(), path.filename().string());
  TG_TRY(save_profile(measured.profile, temporary.string()));
  fmt::print(
      stderr,
      "tangram: warning: cannot write the profile cache ({}); the profile (made in {:.1f}s) is "
      "used for "
      "this run only: give a writable folder with --profile-cache DIR or TANGRAM_PROFILE_CACHE\n",
      saved.message(), seconds);
  out.path = temporary.string();
  out.origin = "temporary";
  out.temporary = std::make_unique<TemporaryFile>(temporary);
  return out;
}

Result<ResolvedProfile> resolve_kv_profile(EngineOptions& options, const EngineFlags& flags,
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

}  // namespace tangram::cli
