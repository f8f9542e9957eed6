#include "cli/engine_flags.h"

#include <algorithm>

#include "common/units.h"
#include "store/session_redis_store.h"

namespace tangram::cli {

Result<EngineOptions> to_engine_options(const EngineFlags& f) {
  EngineOptions o;
  auto bytes = parse_bytes(f.kv_memory);
  if (!bytes) return make_error("--kv-memory: {}", bytes.message());
  if (f.kv_type != "f16" && f.kv_type != "f32")
    return make_error("--kv-type must be f16 or f32, not '{}'", f.kv_type);
  o.threads = f.threads;
  SchedulerOptions& s = o.scheduler;
  s.kv_memory = static_cast<size_t>(*bytes);
  s.page_tokens = f.page_tokens;
  s.page_group_size = f.page_group_size;
  s.kv_type = f.kv_type == "f32" ? KvType::F32 : KvType::F16;
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
  if (!f.kv_redis.empty()) TG_TRY(parse_redis_url(f.kv_redis));  // a typo fails at start-up, not per turn
  k.kv_redis = f.kv_redis;
  k.kv_redis_prefix = f.kv_redis_prefix;
  k.kv_redis_ttl_seconds = f.kv_redis_ttl;
  k.kv_idle_offload_seconds = f.kv_idle_offload;
  CompressionOptions& c = s.compression;
  TG_ASSIGN(c.policy, parse_kv_policy(f.kv_policy));
  TG_ASSIGN(c.level, parse_budget_level(f.kv_level));
  c.ratio = f.kv_ratio;
  c.alpha = f.kv_alpha;
  c.sink = f.kv_sink;
  c.window = f.kv_window;
  c.chunk = f.kv_chunk;
  c.profile = f.kv_profile;
  c.cluster_map = f.kv_cluster_map;
  c.first_turn_only = f.kv_first_turn_only;
  c.scorer.name = f.kv_scorer;
  c.scorer.snap_window = f.snap_window;
  c.scorer.snap_kernel = f.snap_kernel;
  c.scorer.ea_queries = f.ea_queries;
  c.scorer.ea_future = f.ea_future;
  c.scorer.ea_epsilon = f.ea_epsilon;
  c.scorer.ea_covariance = !f.ea_no_covariance;
  c.scorer.ea_value_norm = !f.ea_no_value_norm;
  if (f.attention_split == "runtime") s.attention_split = AttentionSplit::Runtime;
  else if (f.attention_split == "naive") s.attention_split = AttentionSplit::Naive;
  else if (f.attention_split == "aot") s.attention_split = AttentionSplit::AheadOfTime;
  else if (f.attention_split != "auto")
    return make_error("--attention-split must be auto, runtime, naive or aot, not '{}'", f.attention_split);
  TG_TRY(c.validate());
  return o;
}

int64_t model_batch_for(const EngineFlags& f) { return std::max<int64_t>(f.step_tokens, 1); }

}  // namespace tangram::cli
