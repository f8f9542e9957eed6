#include "profiling/auto_profile.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <system_error>

#include <fmt/format.h>

#include "common/file_text.h"
#include "compress/profile.h"
#include "store/session_fingerprint.h"

namespace tangram {

namespace fs = std::filesystem;

namespace {

// About 12.8k tokens of prefill: a second for stories260K, tens of minutes for an 8B model on 2
// cores (docs/reference.md).
constexpr int kAutoSamples = 50;
constexpr int64_t kAutoSampleTokens = 256;

// An unreadable file hashes as empty: the profiler itself then reports it.
std::string read_bytes(const fs::path& path) {
  auto text = read_file_text(path.string(), "the calibration text");
  return text ? std::move(*text) : std::string();
}

// <cache>/<model fingerprint>/<scorer>-<level>-<hash of the settings and the calibration
// text>.json: another model, scorer, level, sink, window or calibration text gets another file.
fs::path cached_profile_path(const fs::path& cache, const Model& model, const ProfilerSettings& p,
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

fs::path home_cache() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x);
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache";
  return fs::temp_directory_path();
}

}  // namespace

ProfilerSettings auto_profile_settings(const Model& model, const std::string& scorer,
                                       const std::string& level, int sink, int window, int threads,
                                       const std::string& model_name) {
  ProfilerSettings p;
  p.model_name = model_name;
  p.scorer = scorer;
  p.level = level == "cross-layer" ? "cross-layer" : "per-layer";
  p.n_samples = kAutoSamples;
  p.sample_tokens = std::clamp<int64_t>(model.config().context_length - 8, 16, kAutoSampleTokens);
  p.turns = 2;
  p.sink = sink;
  p.window = window;
  p.threads = threads;
  return p;
}

fs::path default_profile_cache_dir() {
  if (const char* e = std::getenv("TANGRAM_PROFILE_CACHE"); e && *e) return e;
  return home_cache() / "tangram" / "profiles";
}

TemporaryFile::~TemporaryFile() {
  std::error_code ec;
  fs::remove(path_, ec);
}

Result<ResolvedProfile> automatic_profile(const AutoProfileRequest& request, Model& model,
                                          const Tokenizer& tok) {
  const std::vector<fs::path>& calibration = request.calibration;
  if (calibration.empty()) return make_error("automatic profile: no calibration text given");
  const ProfilerSettings& p = request.settings;
  const fs::path path = cached_profile_path(request.cache_dir, model, p, calibration);
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

}  // namespace tangram
