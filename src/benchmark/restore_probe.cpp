#include "benchmark/restore_probe.h"

#include <filesystem>

#include "engine/engine.h"
#include "evaluation/workload.h"

namespace tangram::bench {

Result<RequestResult> one_token_turn(Engine& e, std::vector<int32_t> prompt,
                                     const std::string& session) {
  Request r;
  r.prompt = std::move(prompt);
  r.session_id = session;
  r.params.temperature = 0;
  r.params.max_tokens = 1;
  r.params.ignore_eos = true;
  TG_ASSIGN(RequestResult out, e.generate(std::move(r)));
  if (out.finish == FinishReason::Error) return make_error("{}", out.error);
  return out;
}

Result<HostRestoreTiming> measure_host_restore(Model& model, const Tokenizer& tok,
                                               const EngineSettings& flags, int64_t n_tokens,
                                               uint32_t seed) {
  // The first message, and one more token for the next turn.
  std::vector<int32_t> prompt = random_tokens(n_tokens + 1, model.config().vocab, seed);
  const int32_t next_token = prompt.back();
  prompt.pop_back();
  EngineSettings f = flags;
  f.kv_host_memory = "64GiB";  // the spill area only holds what is put there
  f.kv_disk.clear();
  f.kv_redis.clear();
  TG_ASSIGN(EngineOptions eo, to_engine_options(f));
  TG_ASSIGN(std::unique_ptr<Engine> engine, Engine::create(model, tok, eo));
  HostRestoreTiming t;
  t.context = n_tokens;
  TG_ASSIGN(RequestResult t1, one_token_turn(*engine, prompt, "s"));
  t.prefill_s = t1.timing.prefill_seconds;
  std::vector<int32_t> next = prompt;
  next.insert(next.end(), t1.tokens.begin(), t1.tokens.end());
  next.push_back(next_token);
  engine->evict_idle_sessions();  // into the host tier
  const SessionTierStats before = engine->stats().tiers;
  t.offload_s = before.offload_seconds;
  t.session_bytes = before.host_bytes;
  TG_ASSIGN(RequestResult again,
            one_token_turn(*engine, next, "fresh"));  // no session: all recomputed
  t.reprefill_s = again.timing.prefill_seconds;
  TG_ASSIGN(RequestResult t2, one_token_turn(*engine, next, "s"));
  engine->wait_idle();  // the stats snapshot then includes the last step
  const SessionTierStats after = engine->stats().tiers;
  if (after.restores != 1 || t2.usage.cached_tokens != n_tokens)
    return make_error(
        "context {}: the host tier did not restore the session (restores {}, cached {})", n_tokens,
        after.restores, t2.usage.cached_tokens);
  t.host_restore_s = after.restore_seconds - before.restore_seconds;
  t.host_ttft_s = t2.timing.prefill_seconds;
  return t;
}

Status measure_disk_restore(Model& model, const Tokenizer& tok, const EngineSettings& flags,
                            const std::string& disk_dir, uint32_t seed, HostRestoreTiming& t) {
  std::vector<int32_t> prompt =
      random_tokens(t.context + 1, model.config().vocab, seed);  // as measure_host_restore
  const int32_t next_token = prompt.back();
  prompt.pop_back();
  std::error_code ec;
  std::filesystem::remove_all(disk_dir, ec);
  EngineSettings f = flags;
  f.kv_host_memory = std::string(
      1, '0');  // no host tier (a literal here trips a GCC 12 -Wrestrict false positive)
  f.kv_disk = disk_dir;
  f.kv_disk_max = "64GiB";
  f.kv_redis.clear();
  TG_ASSIGN(EngineOptions eo, to_engine_options(f));
  std::vector<int32_t> next = prompt;
  {
    TG_ASSIGN(std::unique_ptr<Engine> engine, Engine::create(model, tok, eo));
    TG_ASSIGN(RequestResult t1, one_token_turn(*engine, prompt, "s"));
    next.insert(next.end(), t1.tokens.begin(), t1.tokens.end());
    next.push_back(next_token);
  }  // the engine's end writes the session to disk
  TG_ASSIGN(std::unique_ptr<Engine> engine, Engine::create(model, tok, eo));
  TG_ASSIGN(RequestResult t2, one_token_turn(*engine, next, "s"));
  engine->wait_idle();
  const SessionTierStats st = engine->stats().tiers;
  std::filesystem::remove_all(disk_dir, ec);
  if (st.restores != 1 || t2.usage.cached_tokens != t.context)
    return make_error(
        "context {}: the disk tier did not restore the session (restores {}, cached {})", t.context,
        st.restores, t2.usage.cached_tokens);
  t.disk_restore_s = st.restore_seconds;
  t.disk_ttft_s = t2.timing.prefill_seconds;
  return Status::Ok();
}

}  // namespace tangram::bench
