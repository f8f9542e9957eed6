// The serving engine's settings as a user gives them (text such as "2GiB" or "tangram"), shared by
// every front end that runs the engine (`run`, `chat`, `serve`, `perplexity`, the benchmarks):
// KV memory, page geometry, batching limits, KV compression. to_engine_options() checks them and
// turns them into the engine's EngineOptions; cli/engine_flags.h binds them to command-line flags.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"
#include "engine/engine.h"
#include "model/model.h"

namespace tangram {

struct EngineSettings {
  std::string kv_memory = "1GiB";    // size of the KV page arena
  std::string kv_host_memory = "0";  // host spill area for idle sessions' KV (0: none)
  std::string kv_disk;               // directory of the disk tier ("" = none)
  std::string kv_disk_max = "8GiB";  // its size cap
  std::string kv_redis;              // shared tier address ("" = none)
  std::string kv_redis_prefix;       // its key prefix ("" = derived from the fingerprints)
  int64_t kv_redis_ttl = 0;          // expiry of a stored session, seconds (0 = none)
  double kv_idle_offload = 0;        // seconds idle before a session leaves the pool (0 = off)
  int page_tokens = 16;              // P
  int page_group_size = -1;          // G; 0 = all KV heads of a layer (unified); -1 = the policy's
  std::string kv_type = "f16";       // f16 | f32 | q8_0
  int64_t prefill_chunk = 512;
  int64_t step_tokens = 512;  // tokens per scheduler step
  int max_running = 64;
  int64_t ctx = 0;  // positions per conversation; 0 = the model's context
  int threads = 0;
  // KV compression.
  std::string kv_policy = "full";  // full | uniform | dynamic | tangram
  std::string kv_scorer = "keydiff";
  double kv_ratio = 1.0;
  std::string kv_level = "per-layer";
  double kv_alpha = 2.0;
  std::string kv_budget_scaling = "footprint";  // footprint | none
  int64_t kv_budget_context = 0;                // 0: --kv-chunk (bench: the first message's length)
  int kv_sink = 4;
  int kv_window = 32;
  int64_t kv_chunk = 2048;
  std::string
      kv_profile;  // "" with tangram: the model's cached profile (launch/profile_settings.h)
  std::string profile_cache;  // folder of cached profiles ("" = $TANGRAM_PROFILE_CACHE or
                              // ~/.cache/tangram/profiles)
  std::string kv_cluster_map;
  std::string kv_group_scope = "global";  // global | per-layer
  bool kv_first_turn_only = false;
  int snap_window = 32;
  int snap_kernel = 7;
  int ea_queries = 256;
  int ea_future = 512;
  float ea_epsilon = 1e-2f;
  bool ea_no_covariance = false;
  bool ea_no_value_norm = false;
  std::string attention_split = "auto";  // auto | runtime | naive | aot
  bool mmap =
      false;  // weights read through the file's memory map instead of copied into huge pages
};

// Checks and converts the settings (e.g. kv_memory "2GiB"); errors name the flag that sets it.
Result<EngineOptions> to_engine_options(const EngineSettings& settings);

// How the model must be loaded for these settings (batch limit, where the weights live).
ModelOptions model_options_for(const EngineSettings& settings);

// Where the weights live: read through the file's memory map, or copied into huge pages.
FileMemory weights_memory(bool mmap);
// What --dry-run prints for it.
inline const char* weights_memory_name(bool mmap) { return mmap ? "mmap" : "huge-pages"; }

}  // namespace tangram
