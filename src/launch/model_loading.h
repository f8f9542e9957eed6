// Loading a model to serve: a GGUF file, or a generated model of a preset (the benchmarks' default,
// kept in a cache folder so it is written once), with a progress bar when copying it is slow.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "common/result.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tangram {

// $XDG_CACHE_HOME/tangram/models, else ~/.cache/tangram/models, else a temp folder.
std::filesystem::path default_model_cache_dir();

// The generated model of a preset and weight type (layers capped at max_layers when > 0),
// written into cache_dir (default: default_model_cache_dir()) on first use.
Result<std::string> cached_synth_model(const std::string& preset, const std::string& type,
                                       int max_layers, const std::string& cache_dir, int threads);

// A model and its tokenizer, for the commands that serve requests.
struct LoadedModel {
  std::string path;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};
// Loads `path`, or (when empty) the generated model of preset/type (max_layers > 0 caps its
// layers), with `options` (batch limit, where the weights live; without a load_progress, a bar
// on a terminal when the copy is slow).
Result<LoadedModel> load_model_for_serving(const std::string& path, const std::string& preset,
                                           const std::string& type, int max_layers,
                                           const std::string& cache_dir, int threads,
                                           ModelOptions options);

// A LoadProgress that draws a bar on a terminal once copying the weights of `path` has taken
// more than a second (a fast load prints nothing).
LoadProgress weights_load_progress(const std::string& path);
}  // namespace tangram
