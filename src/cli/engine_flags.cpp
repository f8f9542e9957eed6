#include "cli/engine_flags.h"

#include <algorithm>
#include <optional>

#include <CLI/CLI.hpp>

#include "cli/profile_flags.h"
#include "common/units.h"
#include "kv/kv_row.h"
#include "store/session_redis_store.h"

namespace tangram::cli {

namespace {

void declare_engine_options(CLI::App* c, EngineFlags& e) {
  c->add_option("--kv-memory", e.kv_memory, "KV page arena size, e.g. 512MiB, 2GiB")
      ->capture_default_str();
  c->add_option("--page-tokens", e.page_tokens, "Token slots per KV page (P)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  c->add_option("--page-group-size", e.page_group_size,
                "KV heads sharing a page (G); 0 = all heads of a layer (unified pages); "
                "-1 = the policy's (tangram 4, the others unified)")
      ->capture_default_str()
      ->check(CLI::Range(-1, 1024));
  c->add_option(
       "--kv-type", e.kv_type,
       "KV element type: f16, f32, or q8_0 (GGUF Q8_0 blocks, ~0.53x f16's bytes; head sizes "
       "must be multiples of 32)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f16", "f32", "q8_0"}));
  c->add_option("--prefill-chunk", e.prefill_chunk, "Most prompt tokens of one sequence per step")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  c->add_option("--step-tokens", e.step_tokens, "Token budget of one batched step")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  c->add_option("--max-running", e.max_running, "Sequences decoding at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  c->add_option("-c,--ctx", e.ctx, "Positions per conversation (default: the model's context)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("-t,--threads", e.threads, "Threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  add_mmap_flag(c, e.mmap);
  c->add_option("--kv-host-memory", e.kv_host_memory,
                "Host memory for idle sessions' KV moved out of the pool (restored, not "
                "recomputed); 0 = none")
      ->capture_default_str();
  c->add_option(
      "--kv-disk", e.kv_disk,
      "Directory for sessions' KV on disk: written after every turn, read back after a restart");
  c->add_option("--kv-disk-max", e.kv_disk_max,
                "Size cap of --kv-disk (least recently used deleted first)")
      ->capture_default_str();
  c->add_option(
      "--kv-redis", e.kv_redis,
      "Redis shared by replicas for sessions' KV (host:port or redis://[:password@]host:port/db): "
      "written after every turn, read by whichever replica serves the next one");
  c->add_option(
      "--kv-redis-prefix", e.kv_redis_prefix,
      "Key prefix in --kv-redis (default: tangram:<fingerprint of model and KV policy>:)");
  c->add_option("--kv-redis-ttl", e.kv_redis_ttl,
                "Expiry of a session in --kv-redis, seconds (0 = none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_option("--kv-idle-offload", e.kv_idle_offload,
                "Move a session's KV out of the pool to the tiers after this many idle seconds (0 "
                "= only when "
                "memory is needed)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_option("--kv-policy", e.kv_policy,
                "KV compression: full (none), uniform, dynamic (run-time budgets), tangram "
                "(deterministic budgets from --kv-profile, head-group pages, ahead-of-time split)")
      ->capture_default_str()
      ->check(CLI::IsMember({"full", "uniform", "dynamic", "tangram"}));
  c->add_option("--kv-scorer", e.kv_scorer,
                "Token scorer: keydiff, kvzip (query-agnostic), snapkv, tova, expected_attention, "
                "streamingllm")
      ->capture_default_str();
  c->add_option("--kv-ratio", e.kv_ratio, "Fraction of the context kept (1 = no compression)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  c->add_option("--kv-level", e.kv_level,
                "How dynamic spreads its budget: uniform, per-layer, cross-layer")
      ->capture_default_str()
      ->check(CLI::IsMember({"uniform", "per-layer", "cross-layer"}));
  c->add_option("--kv-alpha", e.kv_alpha,
                "Safety coefficient of deterministic budgets (mean + alpha x std)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_option("--kv-budget-scaling", e.kv_budget_scaling,
                "How tangram's profile budgets meet --kv-ratio: footprint (one factor on every "
                "mean + alpha x std "
                "so that what its head groups keep, group maxima, sink and window included, is "
                "--kv-ratio of "
                "full KV) or none (the profile's budgets x ratio / profiled ratio)")
      ->capture_default_str()
      ->check(CLI::IsMember({"footprint", "none"}));
  c->add_option("--kv-budget-context", e.kv_budget_context,
                "Context length (tokens) at which --kv-budget-scaling footprint matches --kv-ratio "
                "(0 = --kv-chunk; bench: the first message's length)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_option("--kv-sink", e.kv_sink, "First tokens always kept")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_option("--kv-window", e.kv_window, "Most recent tokens always kept")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_option("--kv-chunk", e.kv_chunk,
                "Long prompts are compressed every this many tokens (bench: 0 = auto)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_option(
       "--kv-profile", e.kv_profile,
       "Per-head retention profile (tangram policy; default: the model's own, made on first use "
       "from "
       "tangram's calibration text and cached; `tangram profile` makes one from your text)")
      ->check(CLI::ExistingFile);
  c->add_option("--profile-cache", e.profile_cache,
                "Folder of the cached per-model profiles of the tangram policy (default: "
                "$TANGRAM_PROFILE_CACHE, "
                "else $XDG_CACHE_HOME/tangram/profiles or ~/.cache/tangram/profiles)");
  c->add_option("--kv-cluster-map", e.kv_cluster_map,
                "Head-group map (default: cluster the profile; `tangram cluster`)")
      ->check(CLI::ExistingFile);
  c->add_option(
       "--kv-group-scope", e.kv_group_scope,
       "Tangram head groups: global (heads of similar budget from any layers share pages) or "
       "per-layer (each layer's heads apart)")
      ->capture_default_str()
      ->check(CLI::IsMember({"global", "per-layer"}));
  c->add_flag("--kv-first-turn-only", e.kv_first_turn_only,
              "Compress only a conversation's first prefill (as the reference implementation)");
  c->add_option("--snap-window", e.snap_window, "SnapKV observation window")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--snap-kernel", e.snap_kernel, "SnapKV pooling kernel (odd)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--ea-queries", e.ea_queries,
                "ExpectedAttention: last prompt queries whose statistics are used")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--ea-future", e.ea_future, "ExpectedAttention: future positions averaged")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--ea-epsilon", e.ea_epsilon,
                "ExpectedAttention: epsilon added to the expected attention")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_flag("--ea-no-covariance", e.ea_no_covariance, "ExpectedAttention: mean query only");
  c->add_flag("--ea-no-value-norm", e.ea_no_value_norm,
              "ExpectedAttention: do not weight by value norms");
  c->add_option(
       "--attention-split", e.attention_split,
       "Attention work split across threads: auto (the policy's), runtime (planned every step), "
       "naive (one item per head group), aot (balanced, planned ahead of time)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "runtime", "naive", "aot"}));
}

}  // namespace

std::vector<CLI::Option*> add_engine_options(CLI::App* c, EngineFlags& e) {
  const size_t before = c->get_options().size();
  declare_engine_options(c, e);
  std::vector<CLI::Option*> added = c->get_options();
  added.erase(added.begin(), added.begin() + static_cast<std::ptrdiff_t>(before));
  return added;
}

std::vector<std::string> given_as_args(const std::vector<CLI::Option*>& options) {
  std::vector<std::string> words;
  for (const CLI::Option* o : options) {
    if (o->count() == 0) continue;
    const std::string name =
        o->get_lnames().empty() ? "-" + o->get_snames().front() : "--" + o->get_lnames().front();
    if (o->get_expected_min() == 0) {  // a flag
      words.push_back(name);
      continue;
    }
    for (const std::string& v : o->results()) {
      words.push_back(name);
      words.push_back(v);
    }
  }
  return words;
}

Result<EngineOptions> to_engine_options(const EngineFlags& f) {
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
  // (profile_flags.h); every other setting is checked now, before anything slow.
  CompressionOptions checked = c;
  if (wants_auto_profile(f)) checked.profile = "(the model's cached profile)";
  TG_TRY(checked.validate());
  return o;
}

ModelOptions model_options_for(const EngineFlags& f) {
  ModelOptions o;
  o.max_batch = std::max<int64_t>(f.step_tokens, 1);
  o.weights = weights_memory(f.mmap);
  return o;
}

FileMemory weights_memory(bool mmap) { return mmap ? FileMemory::kMapped : FileMemory::kHugePages; }

void add_mmap_flag(CLI::App* command, bool& mmap) {
  command->add_flag(
      "--mmap", mmap,
      "Read the weights through the model file's memory map (4 KiB pages, no copy, Q8_0/Q4_K "
      "matrices "
      "repacked on each step of 8 or more tokens) instead of copying them into huge pages with "
      "those matrices "
      "interleaved once at load (faster decode; a model larger than the available memory is mapped "
      "anyway)");
}

}  // namespace tangram::cli
