#include "cli/bench_models.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "cli/data_dir.h"
#include "gguf/gguf_file.h"
#include "model/synth.h"

namespace fs = std::filesystem;

namespace tangram::cli {

fs::path shared_dir() {
  if (const char* e = std::getenv("TANGRAM_SHARED_DIR"); e && *e) return e;
  return data_dir();
}

fs::path default_model_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "tangram" / "models";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "tangram" / "models";
  return fs::temp_directory_path() / "tangram-models";
}

Result<std::string> cached_synth_model(const std::string& preset, const std::string& type,
                                       int max_layers, const std::string& cache_dir, int threads) {
  const fs::path dir = cache_dir.empty() ? default_model_cache_dir() : fs::path(cache_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error("cannot create the model cache folder {}: {}", dir.string(), ec.message());
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
                                           const std::string& cache_dir, int threads, int64_t max_batch) {
  LoadedModel m;
  m.path = path;
  if (m.path.empty()) {
    TG_ASSIGN(m.path, cached_synth_model(preset, type, max_layers, cache_dir, threads));
  }
  ModelOptions mo;
  mo.max_batch = max_batch;
  TG_ASSIGN(m.model, Model::load(m.path, mo));
  TG_ASSIGN(m.tokenizer, Tokenizer::from_gguf(m.model->gguf()));
  return m;
}

DecodeCost decode_cost(const Model& m) {
  DecodeCost c;
  const GgufFile& g = m.gguf();
  const bool tied = g.find_tensor("output.weight") == nullptr;
  for (const auto& t : g.tensors()) {
    if (t.n_dims < 2) continue;
    if (t.name == "token_embd.weight" && !tied) continue;
    c.weight_bytes += static_cast<double>(t.nbytes);
    c.matmul_flops += 2.0 * static_cast<double>(t.ne[0] * t.ne[1]);
  }
  return c;
}

}  // namespace tangram::cli
