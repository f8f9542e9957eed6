#include "launch/engine_settings.h"

#include <algorithm>
#include <optional>

#include "common/units.h"
#include "kv/kv_row.h"
#include "launch/profile_settings.h"
#include "store/session_redis_store.h"

namespace tangram {

Result<EngineOptions> to_engine_options(const EngineSettings& f) {
  EngineOptions o;
  auto bytes = parse_bytes(f.kv_memory);
  if (!bytes) return make_error("--kv-memory: {}", bytes.message());
  const std::optional<KvType> kv_type = parse_kv_type(f.kv_type);
  if (!kv_type) return make_error("--kv-type must be f16, f32 or q8_0, not '{}'", f.kv_type);
  o.threads = f.threads;
  SchedulerOptions& s = o.scheduler;
  s.kv_memory = static_cast<size_t>(*bytes);
  s.page_tokens = f.page_tokens;
  s.page_group_size = f.page_group_size;
  s.kv_type = *kv_type;
  s.prefill_chunk = f.prefill_chunk;
  s.step_tokens = f.step_tokens;
  s.max_running = f.max_running;
  s.max_context = f.ctx;
  SessionKeeperOptions& k = o.sessions;
  auto host = parse_bytes(f.kv_host_memory);
  if (!host) return make_error("--kv-host-memory: {}", host.message());
  k.kv_host_memory = static_cast<size_t>(*host);
  auto disk = parse_bytes(f.kv_disk_max);
  if (!disk) return make_error("--kv-disk-max: {}", disk.message());
  k.kv_disk_bytes = static_cast<uint64_t>(*disk);
  k.kv_disk_dir = f.kv_disk;
  if (!f.kv_redis.empty())
    TG_TRY(parse_redis_url(f.kv_redis));  // a typo fails at start-up, not per turn
  k.kv_redis = f.kv_redis;
  k.kv_redis_prefix = f.kv_redis_prefix;
  k.kv_redis_ttl_seconds = f.kv_redis_ttl;
  k.kv_idle_offload_seconds = f.kv_idle_offload;
  CompressionOptions& c = s.compression;
  TG_ASSIGN(c.policy, parse_kv_policy(f.kv_policy));
  TG_ASSIGN(c.level, parse_budget_level(f.kv_level));
  c.ratio = f.kv_ratio;
  c.alpha = f.kv_alpha;
  TG_ASSIGN(c.budget_scaling, parse_budget_scaling(f.kv_budget_scaling));
  c.budget_context = f.kv_budget_context;
  c.sink = f.kv_sink;
  c.window = f.kv_window;
  c.chunk = f.kv_chunk;
  c.profile =
      f.kv_profile;  // "" with tangram: resolve_kv_profile() fills it once the model is loaded
  c.cluster_map = f.kv_cluster_map;
  if (f.kv_group_scope != "global" && f.kv_group_scope != "per-layer")
    return make_error("--kv-group-scope must be global or per-layer, not '{}'", f.kv_group_scope);
  c.per_layer_groups = f.kv_group_scope == "per-layer";
  c.first_turn_only = f.kv_first_turn_only;
  c.scorer.name = f.kv_scorer;
  c.scorer.snap_window = f.snap_window;
  c.scorer.snap_kernel = f.snap_kernel;
  c.scorer.ea_queries = f.ea_queries;
  c.scorer.ea_future = f.ea_future;
  c.scorer.ea_epsilon = f.ea_epsilon;
  c.scorer.ea_covariance = !f.ea_no_covariance;
  c.scorer.ea_value_norm = !f.ea_no_value_norm;
  if (f.attention_split == "runtime")
    s.attention_split = AttentionSplit::Runtime;
  else if (f.attention_split == "naive")
    s.attention_split = AttentionSplit::Naive;
  else if (f.attention_split == "aot")
    s.attention_split = AttentionSplit::AheadOfTime;
  else if (f.attention_split != "auto")
    return make_error("--attention-split must be auto, runtime, naive or aot, not '{}'",
                      f.attention_split);
  // Without --kv-profile the tangram policy's profile is found or made once the model is loaded
  // (launch/profile_settings.h); every other setting is checked now, before anything slow.
  CompressionOptions checked = c;
  if (wants_auto_profile(f)) checked.profile = "(the model's cached profile)";
  TG_TRY(checked.validate());
  return o;
}

ModelOptions model_options_for(const EngineSettings& f) {
  ModelOptions o;
  o.max_batch = std::max<int64_t>(f.step_tokens, 1);
  o.weights = weights_memory(f.mmap);
  return o;
}

FileMemory weights_memory(bool mmap) { return mmap ? FileMemory::kMapped : FileMemory::kHugePages; }

}  // namespace tangram
