#include "launch/model_loading.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "common/progress.h"
#include "gguf/gguf_file.h"
#include "launch/data_dir.h"
#include "synth/synth.h"

namespace fs = std::filesystem;

namespace tangram {

fs::path default_model_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return fs::path(x) / "tangram" / "models";
  if (const char* h = std::getenv("HOME"); h && *h)
    return fs::path(h) / ".cache" / "tangram" / "models";
  return fs::temp_directory_path() / "tangram-models";
}

Result<std::string> cached_synth_model(const std::string& preset, const std::string& type,
                                       int max_layers, const std::string& cache_dir, int threads) {
  const fs::path dir = cache_dir.empty() ? default_model_cache_dir() : fs::path(cache_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return make_error("cannot create the model cache folder {}: {}", dir.string(), ec.message());
  TG_ASSIGN(SynthSpec spec, synth_preset(preset));
  if (max_layers > 0) spec.n_layers = std::min(spec.n_layers, max_layers);
  TG_TRY(synth_set_weight_type(spec, type));
  const fs::path p = dir / fmt::format("{}-{}L-{}.gguf", preset, spec.n_layers, type);
  if (!fs::exists(p)) {
    fmt::print("generating {} (cached for later runs)...\n", p.string());
    TG_TRY(write_synth_model(spec, p.string(), threads));
  }
  return p.string();
}

Result<LoadedModel> load_model_for_serving(const std::string& path, const std::string& preset,
                                           const std::string& type, int max_layers,
                                           const std::string& cache_dir, int threads,
                                           ModelOptions options) {
  LoadedModel m;
  m.path = path;
  if (m.path.empty()) {
    TG_ASSIGN(m.path, cached_synth_model(preset, type, max_layers, cache_dir, threads));
  }
  if (!options.load_progress) options.load_progress = weights_load_progress(m.path);
  TG_ASSIGN(m.model, Model::load(m.path, options));
  TG_ASSIGN(m.tokenizer, Tokenizer::from_gguf(m.model->gguf()));
  return m;
}

LoadProgress weights_load_progress(const std::string& path) {
  struct State {
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    std::unique_ptr<ProgressBar> bar;
  };
  auto state = std::make_shared<State>();
  return
      [state, label = "loading " + fs::path(path).filename().string()](size_t done, size_t total) {
        if (!state->bar) {
          if (std::chrono::steady_clock::now() - state->start < std::chrono::seconds(1)) return;
          state->bar = std::make_unique<ProgressBar>(label, static_cast<int64_t>(total >> 20));
        }
        state->bar->update(static_cast<int64_t>(done >> 20));
        if (done == total) state->bar->finish();
      };
}

}  // namespace tangram
