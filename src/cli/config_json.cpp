#include "cli/config_json.h"
#include "launch/data_dir.h"

#include <string>

#include "benchmark/multiturn.h"
#include "launch/profile_settings.h"
#include "profiling/profiler.h"

namespace tangram::cli {

using nlohmann::json;

namespace {

std::string attention_split_name(const std::optional<AttentionSplit>& split) {
  if (!split) return "auto";
  switch (*split) {
    case AttentionSplit::Runtime:
      return "runtime";
    case AttentionSplit::Naive:
      return "naive";
    case AttentionSplit::AheadOfTime:
      return "aot";
  }
  return "auto";
}

json compression_json(const CompressionOptions& c) {
  const ScorerOptions& s = c.scorer;
  return {{"policy", kv_policy_name(c.policy)},
          {"ratio", c.ratio},
          {"level", budget_level_name(c.level)},
          {"alpha", c.alpha},
          {"budget_scaling", budget_scaling_name(c.budget_scaling)},
          {"budget_context", c.budget_context},
          {"sink", c.sink},
          {"window", c.window},
          {"chunk", c.chunk},
          {"first_turn_only", c.first_turn_only},
          {"profile", c.profile},
          {"cluster_map", c.cluster_map},
          {"group_scope", c.per_layer_groups ? "per-layer" : "global"},
          {"reconstruction_tokens", c.reconstruction_tokens},
          {"scorer",
           {{"name", s.name},
            {"snap_window", s.snap_window},
            {"snap_kernel", s.snap_kernel},
            {"ea_queries", s.ea_queries},
            {"ea_skip", s.ea_skip},
            {"ea_future", s.ea_future},
            {"ea_epsilon", s.ea_epsilon},
            {"ea_covariance", s.ea_covariance},
            {"ea_value_norm", s.ea_value_norm}}}};
}

json report_output_json(const bench::ReportOutput& out) {
  return {{"out", out.out_dir}, {"json", out.json_stdout}};
}

}  // namespace

json engine_options_json(const EngineOptions& o) {
  const SchedulerOptions& s = o.scheduler;
  const SessionKeeperOptions& k = o.sessions;
  return {{"threads", o.threads},
          {"kv_memory", s.kv_memory},
          {"page_tokens", s.page_tokens},
          {"page_group_size", s.page_group_size},
          {"kv_type", kv_type_name(s.kv_type)},
          {"prefill_chunk", s.prefill_chunk},
          {"step_tokens", s.step_tokens},
          {"max_running", s.max_running},
          {"max_context", s.max_context},
          {"keep_sessions", s.keep_sessions},
          {"max_sessions", k.max_sessions},
          {"kv_host_memory", k.kv_host_memory},
          {"kv_disk_dir", k.kv_disk_dir},
          {"kv_disk_bytes", k.kv_disk_bytes},
          {"kv_redis", k.kv_redis},
          {"kv_redis_prefix", k.kv_redis_prefix},
          {"kv_redis_ttl_seconds", k.kv_redis_ttl_seconds},
          {"kv_idle_offload_seconds", k.kv_idle_offload_seconds},
          {"attention_split", attention_split_name(s.attention_split)},
          {"compression", compression_json(s.compression)}};
}

json sampling_json(const SamplingParams& s) {
  return {{"temperature", s.temperature},
          {"top_k", s.top_k},
          {"top_p", s.top_p},
          {"min_p", s.min_p},
          {"repetition_penalty", s.repetition_penalty},
          {"presence_penalty", s.presence_penalty},
          {"frequency_penalty", s.frequency_penalty},
          {"penalty_last_n", s.penalty_last_n},
          {"seed", s.seed_set ? json(s.seed) : json("random")},
          {"max_tokens", s.max_tokens},
          {"stop", s.stop},
          {"ignore_eos", s.ignore_eos}};
}

Result<json> engine_flags_json(const EngineSettings& flags) {
  TG_ASSIGN(EngineOptions options, to_engine_options(flags));
  json j = engine_options_json(options);
  j["compression"]["profile_source"] = profile_source_json(flags);
  j["weights"] = weights_memory_name(flags.mmap);
  return j;
}

Result<json> plan_json(const InfoOptions& o) {
  return json{{"model", o.model}, {"full", o.full}, {"cpu", o.cpu}};
}

Result<json> plan_json(const TokenizeOptions& o) {
  return json{
      {"model", o.model},      {"flavor", o.flavor},           {"text", o.text},
      {"file", o.file},        {"add_special", o.add_special}, {"parse_special", o.parse_special},
      {"ids_only", o.ids_only}};
}

Result<json> plan_json(const RunOptions& o) {
  json j{{"model", o.model},
         {"prompt", o.prompt},
         {"system", o.system},
         {"chat", o.chat},
         {"chat_template", o.chat_template},
         {"max_tokens", o.max_tokens},
         {"quiet", o.quiet},
         {"sampling", sampling_json(o.sampling)}};
  TG_ASSIGN(j["engine"], engine_flags_json(o.engine));
  return j;
}

Result<json> plan_json(const ChatOptions& o) {
  json j{
      {"model", o.model},           {"system", o.system}, {"chat_template", o.chat_template},
      {"max_tokens", o.max_tokens}, {"quiet", o.quiet},   {"sampling", sampling_json(o.sampling)}};
  TG_ASSIGN(j["engine"], engine_flags_json(o.engine));
  return j;
}

Result<json> plan_json(const ServeOptions& o) {
  json j{{"model", o.model},
         {"chat_template", o.chat_template},
         {"model_name", o.model_name},
         {"host", o.host},
         {"port", o.port},
         {"api_keys", o.api_keys.size()},
         {"api_key_file", o.api_key_file},
         {"allowed_hosts", o.allowed_hosts},
         {"max_queue", o.max_queue},
         {"http_threads", o.http_threads},
         {"max_body", o.max_body},
         {"max_body_in_flight", o.max_body_in_flight},
         {"read_timeout_s", o.read_timeout_s},
         {"write_timeout_s", o.write_timeout_s},
         {"max_connections", o.max_connections},
         {"max_connections_per_ip", o.max_connections_per_ip},
         {"max_headers", o.max_headers},
         {"max_header_bytes", o.max_header_bytes},
         {"max_conversations", o.max_conversations},
         {"context_overflow", o.context_overflow},
         {"pooling", o.pooling},
         {"log_level", o.log_level},
         {"sampling", sampling_json(o.sampling)}};
  TG_ASSIGN(j["engine"], engine_flags_json(o.engine));
  return j;
}

// Without --samples: the shipped calibration files it would read.
Result<json> plan_json(const ProfileOptions& o) {
  std::vector<std::string> samples = o.samples;
  if (samples.empty()) {
    TG_ASSIGN(std::vector<std::filesystem::path> shipped, calibration_files(calibration_folders()));
    for (const auto& f : shipped) samples.push_back(f.string());
  }
  return json{{"model", o.model},
              {"samples", samples},
              {"scorer", o.scorer},
              {"ratio", o.ratio},
              {"level", o.level},
              {"n_samples", o.n_samples},
              {"sample_tokens", o.sample_tokens},
              {"turns", o.turns},
              {"sink", o.sink},
              {"window", o.window},
              {"threads", o.threads},
              {"out", o.out},
              {"weights", weights_memory_name(o.mmap)}};
}

Result<json> plan_json(const MkmodelOptions& o) {
  return json{{"preset", o.preset},
              {"arch", o.arch},
              {"layers", o.n_layers},
              {"embd", o.n_embd},
              {"ff", o.n_ff},
              {"heads", o.n_head},
              {"kv_heads", o.n_kv_head},
              {"head_dim", o.head_dim},
              {"vocab", o.vocab},
              {"ctx", o.ctx},
              {"type", o.type},
              {"seed", o.seed},
              {"tied", o.tied},
              {"llama3_rope", o.llama3_rope},
              {"tokenizer", o.tokenizer},
              {"flavor", o.flavor},
              {"out", o.out},
              {"threads", o.threads}};
}

Result<json> plan_json(const ClusterOptions& o) {
  return json{
      {"profile", o.profile}, {"group_size", o.group_size}, {"scope", o.scope}, {"out", o.out}};
}

Result<json> plan_json(const PerplexityCmdOptions& o) {
  json j{{"model", o.model}, {"file", o.file}, {"chunk", o.chunk}, {"json", o.json}};
  TG_ASSIGN(j["engine"], engine_flags_json(o.engine));
  return j;
}

Result<json> plan_json(const RecallCmdOptions& o) {
  json j{{"model", o.model},
         {"set", o.set.empty() ? default_recall_set().string() : o.set},
         {"chat_template", o.chat_template},
         {"conversations", o.conversations},
         {"max_answer_tokens", o.max_answer_tokens},
         {"json", o.json}};
  TG_ASSIGN(j["engine"], engine_flags_json(o.engine));
  return j;
}

// bench sizes the KV memory (--kv-memory auto), the compression chunk (--kv-chunk 0) and the
// budget scaling's context (--kv-budget-context 0) from the model and the workload, which
// --dry-run does not load: those stay as given.
Result<json> plan_json(const BenchOptions& o) {
  TG_TRY(bench::check_bench_flags(o));
  EngineSettings engine = o.engine;
  const bool auto_memory = engine.kv_memory == "auto";
  if (auto_memory) engine.kv_memory = "0";
  const bool auto_chunk = engine.kv_chunk <= 0;
  if (auto_chunk) engine.kv_chunk = 2 * static_cast<int64_t>(engine.kv_window) + 1;
  json j{{"model", o.model},
         {"preset", o.preset},
         {"type", o.type},
         {"layers", o.layers},
         {"cache_dir", o.cache_dir},
         {"workload", o.workload},
         {"trace", o.trace},
         {"conversations", o.conversations},
         {"turns", o.turns},
         {"concurrency", o.concurrency},
         {"first_turn_tokens", o.first_turn_tokens},
         {"followup_tokens", o.followup_tokens},
         {"gen_tokens", o.gen_tokens},
         {"rate", o.rate},
         {"rates", o.rates},
         {"ttft_limit", o.ttft_limit.value_or(bench::kDefaultTtftLimit)},
         {"think_time", o.think_time},
         {"seed", o.seed},
         {"policies", o.policies},
         {"ratios", o.ratios},
         {"dynamic_bracket", o.dynamic_bracket},
         {"group_sizes", o.group_sizes},
         {"scorer", o.scorer},
         {"profile", o.profile},
         {"profile_dir", o.profile_dir},
         {"profile_model", o.profile_model},
         {"memory_sessions", o.memory_sessions},
         {"accuracy", o.accuracy},
         {"numerical_check", o.numerical_check},
         {"facts", o.facts},
         {"task_model", o.task_model},
         {"task_set", o.task_set},
         {"task_conversations", o.task_conversations},
         {"task_profile", o.task_profile},
         {"accuracy_text", o.accuracy_text},
         {"accuracy_tokens", o.accuracy_tokens},
         {"restore_contexts", o.restore_contexts},
         {"disk_dir", o.disk_dir},
         {"oversubscription", o.oversubscription},
         {"quick", o.quick},
         {"report", report_output_json(o.output)}};
  for (const bench::RunPlan& plan : bench::plan_runs(o))
    j["runs"].push_back(
        {{"policy", plan.policy}, {"ratio", plan.ratio}, {"group_size", plan.group_size}});
  TG_ASSIGN(j["engine"], engine_flags_json(engine));
  if (auto_memory) j["engine"]["kv_memory"] = "auto";
  if (auto_chunk) j["engine"]["compression"]["chunk"] = "auto";
  if (engine.kv_budget_context <= 0) j["engine"]["compression"]["budget_context"] = "auto";
  return j;
}

Result<json> plan_json(const BenchModelOptions& o) {
  TG_TRY(check_bench_model_flags(o));
  return json{{"model", o.model},
              {"preset", o.preset},
              {"types", o.types},
              {"prompt_tokens", o.prompt_tokens},
              {"gen_tokens", o.gen_tokens},
              {"threads", o.threads},
              {"reps", reps_of(o)},
              {"cache_dir", o.cache_dir},
              {"llama_cpp", o.llama_cpp},
              {"concurrency", o.concurrency},
              {"quick", o.quick},
              {"context", o.context},
              {"policies", o.policies},
              {"kv_ratio", o.kv_ratio},
              {"profile", o.profile},
              {"kv_types", o.kv_types},
              {"page_tokens", o.page_tokens},
              {"rounds", rounds_of(o)},
              {"weights", weights_memory_name(o.mmap)},
              {"report", report_output_json(o.output)}};
}

Result<json> plan_json(const BenchServeOptions& o) {
  TG_TRY(check_bench_serve_flags(o));
  json j{{"url", o.url},
         {"api_key", !o.api_key.empty()},
         {"model", o.model},
         {"preset", o.preset},
         {"type", o.type},
         {"layers", o.layers},
         {"cache_dir", o.cache_dir},
         {"workload", o.workload},
         {"conversations", o.conversations},
         {"turns", o.turns},
         {"seed", o.seed},
         {"rates", o.rates},
         {"max_retries", o.max_retries},
         {"timeout_s", o.timeout_s},
         {"max_queue", o.max_queue},
         {"quick", o.quick},
         {"report", report_output_json(o.output)},
         {"soak",
          {{"duration", o.soak},
           {"restart_every", o.soak_restart_every},
           {"sample", o.soak_sample},
           {"rss_growth", o.soak_rss_growth}}}};
  TG_ASSIGN(j["engine"], engine_flags_json(o.engine));
  return j;
}

}  // namespace tangram::cli
