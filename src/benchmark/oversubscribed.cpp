#include "benchmark/oversubscribed.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <mutex>

#include <fmt/format.h>
#include <unistd.h>

#include "common/progress.h"
#include "common/units.h"
#include "engine/engine.h"
#include "evaluation/workload.h"

namespace tangram::bench {
namespace {

using Clock = std::chrono::steady_clock;

Request turn_request(const std::vector<int32_t>& prompt, const std::string& session, int gen) {
  Request r;
  r.prompt = prompt;
  r.session_id = session;
  r.params.temperature = 0;
  r.params.max_tokens = gen;
  r.params.ignore_eos = true;
  return r;
}

struct Outcome {
  std::string name;
  double followup_seconds = 0;  // wall time of turns 2..K
  double followup_turns = 0;
  double followup_out_tokens = 0;
  double followup_ttft_sum = 0;
  int64_t prefill_tokens = 0;  // computed over the whole run (turn 1 included)
  int64_t cached_tokens = 0;   // reused over turns 2..K
  SessionTierStats tiers;
  int64_t evictions = 0;
};

// Plays every turn of every conversation through one engine.
Result<Outcome> play(Model& model, const Tokenizer& tok, const EngineOptions& eo,
                     const OversubscribedOptions& opt, const std::string& name, ProgressBar& bar) {
  TG_ASSIGN(std::unique_ptr<Engine> engine, Engine::create(model, tok, eo));
  const int64_t vocab = model.config().vocab;
  const auto S = static_cast<size_t>(opt.sessions);
  std::vector<std::vector<int32_t>> prompt(S);
  for (size_t i = 0; i < S; ++i) prompt[i] = random_tokens(opt.first_tokens, vocab, 1000 + i);
  Outcome out;
  out.name = name;
  std::vector<RequestResult> results(S);
  std::mutex mu;
  for (int k = 0; k < opt.turns; ++k) {
    const auto t0 = Clock::now();
    for (size_t first = 0; first < S; first += static_cast<size_t>(opt.concurrency)) {
      const size_t last = std::min(S, first + static_cast<size_t>(opt.concurrency));
      for (size_t i = first; i < last; ++i) {
        Request r = turn_request(prompt[i], fmt::format("conv-{}", i), opt.gen_tokens);
        r.on_finish = [&results, &mu, i](const RequestResult& res) {
          std::lock_guard lock(mu);
          results[i] = res;
        };
        TG_TRY(engine->submit(std::move(r)));
      }
      engine->wait_idle();
      for (size_t i = first; i < last; ++i) {
        const RequestResult& res = results[i];
        if (res.finish == FinishReason::Error)
          return make_error("{}: turn {} of conv-{}: {}", name, k + 1, i, res.error);
        if (k > 0) {
          out.followup_out_tokens += static_cast<double>(res.usage.completion_tokens);
          out.followup_ttft_sum += res.timing.queue_seconds + res.timing.prefill_seconds;
          out.cached_tokens += res.usage.cached_tokens;
          out.followup_turns += 1;
        }
        prompt[i].insert(prompt[i].end(), res.tokens.begin(), res.tokens.end());
        const auto more = random_tokens(opt.followup_tokens, vocab, 5000 + 100 * k + i);
        prompt[i].insert(prompt[i].end(), more.begin(), more.end());
      }
      bar.add(static_cast<int64_t>(last - first));
    }
    if (k > 0) out.followup_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  const SchedulerStats st = engine->stats();
  out.prefill_tokens = st.prefill_tokens;
  out.tiers = st.tiers;
  out.evictions = st.session_evictions;
  return out;
}

}  // namespace

Result<nlohmann::json> run_oversubscribed(Model& model, const Tokenizer& tok,
                                          const EngineSettings& flags,
                                          const OversubscribedOptions& opt) {
  if (opt.sessions < 2 || opt.turns < 2 || opt.concurrency < 1 || opt.oversubscription < 1)
    return make_error(
        "--sessions needs at least 2 sessions, 2 turns, concurrency >= 1 and oversubscription >= "
        "1");
  const int64_t longest =
      opt.first_tokens + (opt.turns - 1) * (opt.followup_tokens + opt.gen_tokens) + opt.gen_tokens;
  if (longest + 2 > model.config().context_length)
    return make_error("a conversation of {} tokens does not fit the model's context {}", longest,
                      model.config().context_length);

  // Probe: one conversation alone in a roomy pool gives a resident session's pages after its last
  // turn, and the page geometry.
  EngineSettings probe = flags;
  probe.kv_memory = "1GiB";
  probe.kv_host_memory = std::string(1, '0');
  probe.kv_disk.clear();
  TG_ASSIGN(EngineOptions peo, to_engine_options(probe));
  peo.scheduler.prefault = false;
  int64_t session_pages = 0, groups = 0, page_tokens = 0;
  size_t page_bytes = 0;
  {
    TG_ASSIGN(std::unique_ptr<Engine> engine, Engine::create(model, tok, peo));
    std::vector<int32_t> p = random_tokens(opt.first_tokens, model.config().vocab, 1000);
    for (int k = 0; k < opt.turns; ++k) {
      TG_ASSIGN(RequestResult r, engine->generate(turn_request(p, "probe", opt.gen_tokens)));
      if (r.finish == FinishReason::Error) return make_error("probe: {}", r.error);
      p.insert(p.end(), r.tokens.begin(), r.tokens.end());
      const auto more = random_tokens(opt.followup_tokens, model.config().vocab, 7 + k);
      p.insert(p.end(), more.begin(), more.end());
    }
    engine->wait_idle();
    const SchedulerStats st = engine->stats();
    session_pages = st.pool.used_pages;
    page_bytes = st.pool.page_bytes;
    engine->run_on_worker([&](Scheduler& s) {
      groups = s.group_map().total_groups();
      page_tokens = s.options().page_tokens;
    });
  }
  // The pool: S / oversubscription sessions resident, but never less than the running turns'
  // uncompressed peak (a recomputed history is prefilled whole).
  const int64_t running_peak =
      opt.concurrency * groups * ((longest + page_tokens - 1) / page_tokens) + groups;
  const auto resident_pages = static_cast<int64_t>(static_cast<double>(session_pages) *
                                                   opt.sessions / opt.oversubscription);
  const int64_t pool_pages = std::max(resident_pages, running_peak);
  const double fits =
      static_cast<double>(pool_pages) / static_cast<double>(std::max<int64_t>(session_pages, 1));

  namespace fs = std::filesystem;
  const fs::path disk = opt.disk_dir.empty() ? fs::temp_directory_path() /
                                                   fmt::format("tangram-oversub-{}", ::getpid())
                                             : fs::path(opt.disk_dir);
  struct Config {
    const char* name;
    const char* host;
    bool disk;
  };
  const Config configs[] = {{"no tiers (recompute)", "0", false},
                            {"host tier", "64GiB", false},
                            {"disk tier", "0", true}};
  ProgressBar bar("oversubscribed",
                  static_cast<int64_t>(std::size(configs)) * opt.sessions * opt.turns);
  std::vector<Outcome> outcomes;
  for (const Config& c : configs) {
    EngineSettings f = flags;
    f.kv_memory = std::to_string(static_cast<size_t>(pool_pages) * page_bytes);
    f.kv_host_memory = c.host;
    std::error_code ec;
    fs::remove_all(disk, ec);
    f.kv_disk = c.disk ? disk.string() : std::string();
    f.kv_disk_max = "64GiB";
    TG_ASSIGN(EngineOptions eo, to_engine_options(f));
    TG_ASSIGN(Outcome o, play(model, tok, eo, opt, c.name, bar));
    outcomes.push_back(std::move(o));
    fs::remove_all(disk, ec);
  }
  bar.finish();

  fmt::print(
      "\noversubscribed multi-turn: {} conversations x {} turns ({} + {} x ({} + {}) tokens), {} "
      "at a time; "
      "the pool ({}) holds {:.1f} of them ({:.1f}x oversubscribed)\n\n",
      opt.sessions, opt.turns, opt.first_tokens, opt.turns - 1, opt.followup_tokens, opt.gen_tokens,
      opt.concurrency,
      format_bytes(static_cast<double>(pool_pages) * static_cast<double>(page_bytes)), fits,
      opt.sessions / fits);
  fmt::print("{:<22} {:>12} {:>10} {:>10} {:>12} {:>14} {:>9} {:>9}\n", "configuration", "turns/s",
             "x none", "out tok/s", "mean TTFT", "prefill tokens", "restores", "evicted");
  nlohmann::json j;
  j["sessions"] = opt.sessions;
  j["turns"] = opt.turns;
  j["resident_capacity_sessions"] = fits;
  j["pool_bytes"] = static_cast<double>(pool_pages) * static_cast<double>(page_bytes);
  const double base = outcomes[0].followup_turns / std::max(outcomes[0].followup_seconds, 1e-9);
  for (const Outcome& o : outcomes) {
    const double rate = o.followup_turns / std::max(o.followup_seconds, 1e-9);
    const double ttft = o.followup_ttft_sum / std::max(o.followup_turns, 1.0);
    fmt::print("{:<22} {:>12.2f} {:>9.2f}x {:>10.1f} {:>10.0f}ms {:>14} {:>9} {:>9}\n", o.name,
               rate, rate / base, o.followup_out_tokens / std::max(o.followup_seconds, 1e-9),
               1e3 * ttft, o.prefill_tokens, o.tiers.restores, o.evictions);
    j["configs"].push_back(
        {{"name", o.name},
         {"followup_turns_per_s", rate},
         {"speedup_vs_none", rate / base},
         {"followup_out_tok_s", o.followup_out_tokens / std::max(o.followup_seconds, 1e-9)},
         {"followup_mean_ttft_s", ttft},
         {"prefill_tokens", o.prefill_tokens},
         {"cached_tokens", o.cached_tokens},
         {"restores", o.tiers.restores},
         {"evictions", o.evictions},
         {"offload_s", o.tiers.offload_seconds},
         {"restore_s", o.tiers.restore_seconds}});
  }
  fmt::print(
      "\nturns/s, out tok/s and TTFT are over turns 2..{} (turn 1 is the same prefill in every "
      "configuration); prefill tokens count the whole run.\n",
      opt.turns);
  return j;
}

}  // namespace tangram::bench
