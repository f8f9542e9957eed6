#include "cli/engine_flags.h"

#include <CLI/CLI.hpp>

namespace tangram::cli {

namespace {

void declare_engine_options(CLI::App* c, EngineSettings& e) {
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

std::vector<CLI::Option*> add_engine_options(CLI::App* c, EngineSettings& e) {
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
