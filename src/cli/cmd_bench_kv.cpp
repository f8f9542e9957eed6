// `tangram bench-kv`: the four KV policies side by side on the same multi-turn workload.
//
// A generated model with the attention shape of a real one (default: Qwen3-4B's, 36 layers x 8
// KV heads) serves C conversations of T turns each (a long first turn, short follow-ups), the
// conversations of a turn running together. Every policy gets the same prompts. The tangram
// policy takes its budgets from the real profile of that model in ../shared/profiles. Per policy
// the table gives prefill time, compression time as a share of it, the run-time reclamation
// time (selection + compaction + page release), the KV resident after the last turn, its
// wasted-slot fraction, decode tok/s and the budget pressure.
#include <memory>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/bench_models.h"
#include "cli/cli_error.h"
#include "cli/commands.h"
#include "common/progress.h"
#include "common/units.h"
#include "compress/profile.h"
#include "model/model.h"
#include "scheduler/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace tangram::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// The first n_layers layers of a profile (for a shortened model), saved next to the others.
Result<std::string> sliced_profile(const std::string& path, int n_layers, const std::string& out) {
  TG_ASSIGN(RetentionProfile p, load_profile(path));
  if (n_layers >= p.n_layers) return path;
  TG_ASSIGN(RetentionProfile cut, profile_first_layers(std::move(p), n_layers));
  TG_TRY(save_profile(cut, out));
  return out;
}

struct PolicyFigures {
  std::string policy;
  double prefill_s = 0;
  double compress_s = 0;
  double reclaim_s = 0;
  double decode_tok_s = 0;
  double wall_s = 0;
  int64_t resident_pages = 0;
  double resident_bytes = 0;
  double waste = 0;
  int64_t pressured = 0, heads = 0;
  int64_t peak_running = 0;
};

}  // namespace

int cmd_bench_kv(const BenchKvOptions& in) {
  BenchKvOptions opt = in;
  if (opt.quick) {
    opt.first_turn_tokens = std::min(opt.first_turn_tokens, 512);
    opt.turns = std::min(opt.turns, 3);
    opt.gen_tokens = std::min(opt.gen_tokens, 8);
  }
  auto loaded = load_model_for_serving(opt.model, opt.preset, opt.type, opt.quick ? 8 : 0, opt.cache_dir,
                                       opt.engine.threads, model_batch_for(opt.engine));
  if (!loaded) return fail(loaded.message());
  const std::string& path = loaded->path;
  auto* model = &loaded->model;
  auto* tok = &loaded->tokenizer;
  const ModelConfig& cfg = (*model)->config();

  std::string profile = opt.profile;
  if (profile.empty())
    profile = (shared_dir() / "profiles" / opt.scorer_profile_dir / opt.profile_model / "profile_perlayer.json").string();
  if (!fs::exists(profile))
    return fail(fmt::format("profile {} not found: pass --profile (make one with `tangram profile`)", profile));
  {
    auto sliced = sliced_profile(profile, cfg.n_layers, (fs::temp_directory_path() / "tangram-bench-kv-profile.json").string());
    if (!sliced) return fail(sliced.message());
    profile = *sliced;
  }

  // The same prompts for every policy.
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> tokd(3, static_cast<int32_t>(std::min<int64_t>(cfg.vocab, 32000) - 1));
  std::vector<std::vector<std::vector<int32_t>>> turns(static_cast<size_t>(opt.conversations));  // [c][t][tokens]
  for (auto& conv : turns)
    for (int t = 0; t < opt.turns; ++t) {
      std::vector<int32_t> msg(static_cast<size_t>(t == 0 ? opt.first_turn_tokens : opt.turn_tokens));
      for (auto& x : msg) x = tokd(rng);
      conv.push_back(std::move(msg));
    }

  const std::vector<std::string> policies = {"full", "uniform", "dynamic", "tangram"};
  std::vector<PolicyFigures> figures;
  ProgressBar bar("policies", static_cast<int64_t>(policies.size()));
  for (const std::string& name : policies) {
    EngineFlags flags = opt.engine;
    flags.kv_policy = name;
    flags.kv_ratio = name == "full" ? 1.0 : opt.ratio;
    flags.kv_scorer = opt.scorer;
    flags.kv_profile = name == "tangram" ? profile : "";
    flags.page_group_size = name == "tangram" ? opt.group_size : 0;
    auto eo = to_engine_options(flags);
    if (!eo) return fail(eo.message());
    ThreadPool pool(eo->threads);
    auto sched = Scheduler::create(**model, **tok, pool, eo->scheduler);
    if (!sched) return fail(sched.message());
    PolicyFigures f;
    f.policy = name;
    std::vector<std::vector<int32_t>> convo(turns.size());
    int64_t decoded = 0;
    double decode_s = 0;
    const auto t0 = Clock::now();
    for (int t = 0; t < opt.turns; ++t) {
      std::vector<RequestResult> results;
      for (size_t c = 0; c < turns.size(); ++c) {
        convo[c].insert(convo[c].end(), turns[c][static_cast<size_t>(t)].begin(), turns[c][static_cast<size_t>(t)].end());
        Request r;
        r.prompt = convo[c];
        r.params.temperature = 0;
        r.params.max_tokens = opt.gen_tokens;
        r.params.ignore_eos = true;
        r.session_id = fmt::format("conv-{}", c);
        r.on_finish = [&results](const RequestResult& res) { results.push_back(res); };
        if (auto id = (*sched)->submit(std::move(r)); !id) return fail(id.message());
      }
      while (!(*sched)->idle()) {
        (*sched)->step();
        f.peak_running = std::max<int64_t>(f.peak_running, (*sched)->stats().running);
      }
      // The conversations of a turn prefill and decode together: a turn's prefill (decode) time
      // is the longest of its requests'.
      double turn_prefill = 0, turn_decode = 0;
      for (const RequestResult& r : results) {
        if (r.finish == FinishReason::Error) return fail(r.error);
        turn_prefill = std::max(turn_prefill, r.timing.queue_seconds + r.timing.prefill_seconds);
        turn_decode = std::max(turn_decode, r.timing.decode_seconds);
        decoded += std::max<int64_t>(r.usage.completion_tokens - 1, 0);
      }
      f.prefill_s += turn_prefill;
      decode_s += turn_decode;
      for (size_t c = 0; c < convo.size(); ++c) {
        const auto it = std::find_if(results.begin(), results.end(), [&](const RequestResult& r) {
          return r.session_id == fmt::format("conv-{}", c);
        });
        if (it != results.end()) convo[c].insert(convo[c].end(), it->tokens.begin(), it->tokens.end());
      }
    }
    f.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
    const SchedulerStats st = (*sched)->stats();
    f.compress_s = st.compress_seconds;
    f.reclaim_s = st.reclaim_seconds;
    f.resident_pages = st.pool.used_pages;
    f.resident_bytes = static_cast<double>(st.pool.used_pages) * static_cast<double>(st.pool.page_bytes);
    f.waste = st.pool.waste_fraction();
    f.pressured = st.heads_pressured;
    f.heads = st.heads_compressed;
    f.decode_tok_s = decode_s > 0 ? static_cast<double>(decoded) / decode_s : 0;
    figures.push_back(f);
    bar.add();
  }

  fmt::print("\n{}: {} layers x {} KV heads | {} conversations x {} turns ({} + {} tokens per turn, {} "
             "generated) | ratio {}, scorer {}, tangram G = {} with {} | {} threads\n\n",
             path, cfg.n_layers, cfg.n_kv_head, opt.conversations, opt.turns, opt.first_turn_tokens,
             opt.turn_tokens, opt.gen_tokens, opt.ratio, opt.scorer, opt.group_size, profile,
             ThreadPool(opt.engine.threads).size());
  fmt::print("{:<9} {:>7} {:>10} {:>11} {:>9} {:>11} {:>11} {:>9} {:>8} {:>12} {:>9}\n", "policy", "wall s",
             "prefill s", "compress s", "of pf", "reclaim ms", "KV after", "vs full", "waste", "decode tok/s",
             "pressure");
  const double full_bytes = figures.front().resident_bytes;
  nlohmann::json j;
  for (const auto& f : figures) {
    fmt::print("{:<9} {:>7.1f} {:>10.2f} {:>11.3f} {:>8.1f}% {:>11.1f} {:>11} {:>8.2f}x {:>7.1f}% {:>12.1f} {:>8.1f}%\n",
               f.policy, f.wall_s, f.prefill_s, f.compress_s, f.prefill_s > 0 ? 100.0 * f.compress_s / f.prefill_s : 0.0,
               1000.0 * f.reclaim_s, format_bytes(f.resident_bytes),
               f.resident_bytes > 0 ? full_bytes / f.resident_bytes : 0.0, 100.0 * f.waste, f.decode_tok_s,
               f.heads > 0 ? 100.0 * static_cast<double>(f.pressured) / static_cast<double>(f.heads) : 0.0);
    j["policies"].push_back({{"policy", f.policy}, {"prefill_s", f.prefill_s}, {"compress_s", f.compress_s},
                             {"reclaim_s", f.reclaim_s}, {"resident_bytes", f.resident_bytes},
                             {"waste", f.waste}, {"decode_tok_s", f.decode_tok_s},
                             {"pressured_heads", f.pressured}, {"heads", f.heads}, {"wall_s", f.wall_s}});
  }
  fmt::print("\n'vs full' = KV resident under full / under the policy; 'waste' = allocated but empty slots;"
             " 'pressure' = heads whose run-time share exceeded their tangram budget; 'reclaim' = selection,"
             " compaction and page release.\n");
  if (!opt.json_out.empty()) {
    std::ofstream(opt.json_out) << j.dump(2) << "\n";
    fmt::print("figures written to {}\n", opt.json_out);
  }
  return 0;
}

Command register_bench_kv(CLI::App& app) {
  auto opt = std::make_shared<BenchKvOptions>();
  BenchKvOptions& bk = *opt;
  bk.engine.kv_memory = "4GiB";
  auto* c_bk = app.add_subcommand(
      "bench-kv", "KV policies side by side (full, uniform, dynamic, tangram) on one multi-turn workload");
  c_bk->add_option("-m,--model", bk.model, "Benchmark this GGUF instead of a generated model")->check(CLI::ExistingFile);
  c_bk->add_option("--preset", bk.preset, "Shape of the generated model")->capture_default_str();
  c_bk->add_option("--type", bk.type, "Weight type of the generated model")->capture_default_str();
  c_bk->add_option("--profile", bk.profile,
                   "Per-head profile for the tangram policy (default: the real Qwen3-4B profile of --scorer "
                   "in ../shared/profiles)")->check(CLI::ExistingFile);
  c_bk->add_option("--profile-scorer-dir", bk.scorer_profile_dir, "Folder of ../shared/profiles to take the profile from")
      ->capture_default_str();
  c_bk->add_option("--profile-model", bk.profile_model, "Model folder of ../shared/profiles")->capture_default_str();
  c_bk->add_option("--scorer", bk.scorer, "Scorer for the compressing policies")->capture_default_str();
  c_bk->add_option("--ratio", bk.ratio, "Retention ratio")->capture_default_str()->check(CLI::Range(0.01, 1.0));
  c_bk->add_option("--group-size", bk.group_size, "Heads per page for tangram")->capture_default_str()
      ->check(CLI::Range(1, 64));
  c_bk->add_option("--conversations", bk.conversations, "Conversations served together")->capture_default_str()
      ->check(CLI::Range(1, 256));
  c_bk->add_option("--turns", bk.turns, "Turns per conversation")->capture_default_str()->check(CLI::Range(1, 64));
  c_bk->add_option("--first-turn-tokens", bk.first_turn_tokens, "Tokens of the first message")->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  c_bk->add_option("--turn-tokens", bk.turn_tokens, "Tokens of each later message")->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  c_bk->add_option("--gen-tokens", bk.gen_tokens, "Tokens generated per turn")->capture_default_str()
      ->check(CLI::Range(1, 100000));
  c_bk->add_option("--cache-dir", bk.cache_dir, "Where generated models are kept");
  c_bk->add_option("--json", bk.json_out, "Also write the figures as JSON");
  c_bk->add_flag("--quick", bk.quick, "8 layers, shorter turns: well under a minute");
  add_engine_options(c_bk, bk.engine);
  return {c_bk, [opt] { return cmd_bench_kv(*opt); }, {}};
}

}  // namespace tangram::cli
