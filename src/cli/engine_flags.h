// The serving-engine flags shared by `tangram chat`, `tangram bench-batch` (and later the
// server): KV memory, page geometry, batching limits.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"
#include "engine/engine.h"

namespace tangram::cli {

struct EngineFlags {
  std::string kv_memory = "1GiB";  // size of the KV page arena
  int page_tokens = 16;            // P
  int page_group_size = 4;         // G; 0 = all KV heads of a layer (unified pages)
  std::string kv_type = "f16";     // f16 | f32
  int64_t prefill_chunk = 512;
  int64_t step_tokens = 512;       // tokens per scheduler step
  int max_running = 64;
  int64_t ctx = 0;                 // positions per conversation; 0 = the model's context
  int threads = 0;
};

// Checks and converts the flags (e.g. "--kv-memory 2GiB").
Result<EngineOptions> to_engine_options(const EngineFlags& flags);

// The batch limit the model must be loaded with for these flags.
int64_t model_batch_for(const EngineFlags& flags);

}  // namespace tangram::cli
