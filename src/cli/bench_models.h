// What the benchmark commands share: generated models kept in a cache folder, and the bytes
// and FLOPs one decode token costs (to turn tok/s into GB/s and GFLOP/s).
#pragma once

#include <filesystem>
#include <string>

#include "common/result.h"
#include "model/model.h"

namespace tangram::cli {

// $XDG_CACHE_HOME/tangram/models, else ~/.cache/tangram/models, else a temp folder.
std::filesystem::path default_model_cache_dir();

// The generated model of a preset and weight type (layers capped at max_layers when > 0),
// written into cache_dir (default: default_model_cache_dir()) on first use.
Result<std::string> cached_synth_model(const std::string& preset, const std::string& type,
                                       int max_layers, const std::string& cache_dir, int threads);

struct DecodeCost {
  double weight_bytes = 0;  // every matrix a decode step reads in full (the embedding table
                            // only when it doubles as the output projection)
  double matmul_flops = 0;  // 2 x those matrices' parameters
};
DecodeCost decode_cost(const Model& m);

}  // namespace tangram::cli
