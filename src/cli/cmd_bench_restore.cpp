// `tangram bench-restore`: what it costs to bring an idle conversation back, per context length.
// A session of N tokens is prefilled (and compressed by the KV policy: uniform at 25% unless
// flags say otherwise) and then:
//   re-prefill  its next turn under a new session id: every token computed again (what an engine
//               without tiers does after evicting it);
//   host        it is moved to the host-memory tier and its next turn restores it from there;
//   disk        it is written to the disk tier, the engine is restarted on the same folder, and
//               its next turn restores it from disk.
// Each restore is timed by the scheduler (fetch + checks + decode into the pool); the next turn
// is also checked to have reused all N tokens.
#include <memory>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/bench_models.h"
#include "cli/cli_error.h"
#include "cli/commands.h"
#include "cli/restore_probe.h"
#include "common/progress.h"
#include "common/units.h"
#include "engine/engine.h"

namespace tangram::cli {
namespace {

struct Row {
  int64_t context = 0;
  double prefill_s = 0;       // first turn (prefill and compression)
  double reprefill_s = 0;     // next turn without the session: time to first token
  double host_restore_s = 0;  // scheduler's restore time from host memory
  double host_ttft_s = 0;     // next turn's time to first token with the restore
  double disk_restore_s = 0;
  double disk_ttft_s = 0;
  double offload_s = 0;       // encoding into the host tier
  int64_t blob_bytes = 0;
};

}  // namespace

int cmd_bench_restore(const BenchRestoreOptions& in) {
  BenchRestoreOptions opt = in;
  if (opt.quick) opt.contexts = {512, 1024};
  if (opt.engine.kv_policy == "full") {  // the flag's default: the benchmark's is 25% retention
    opt.engine.kv_policy = "uniform";
    opt.engine.kv_ratio = 0.25;
  }
  auto loaded = load_model_for_serving(opt.model, opt.preset, opt.type, opt.model.empty() ? opt.layers : 0,
                                       opt.cache_dir, opt.engine.threads, model_batch_for(opt.engine));
  if (!loaded) return fail(loaded.message());
  Model& model = *loaded->model;
  const Tokenizer& tok = *loaded->tokenizer;
  namespace fs = std::filesystem;
  const fs::path disk = opt.disk_dir.empty() ? fs::temp_directory_path() / fmt::format("tangram-restore-{}", ::getpid())
                                             : fs::path(opt.disk_dir);
  if (opt.workload_only && opt.workload.sessions == 0) return fail("--workload-only needs --sessions N");
  if (opt.workload_only) opt.contexts.clear();
  std::vector<Row> rows;
  std::optional<ProgressBar> bar;
  if (!opt.contexts.empty()) bar.emplace("bench-restore", static_cast<int64_t>(opt.contexts.size()) * 3);
  for (const int64_t n : opt.contexts) {
    if (n + 2 > model.config().context_length) {
      fmt::print(stderr, "note: context {} skipped: the model holds {}\n", n, model.config().context_length);
      bar->add(3);
      continue;
    }
    std::mt19937 rng(static_cast<uint32_t>(n));
    std::uniform_int_distribution<int32_t> d(3, static_cast<int32_t>(std::min<int64_t>(model.config().vocab, 32000) - 1));
    std::vector<int32_t> prompt(static_cast<size_t>(n));
    for (auto& t : prompt) t = d(rng);
    Row row;
    row.context = n;
    // Host tier, and re-prefill on the same engine.
    auto host = measure_host_restore(model, tok, opt.engine, n, static_cast<uint32_t>(n));
    if (!host) return fail(host.message());
    row.prefill_s = host->prefill_s;
    row.reprefill_s = host->reprefill_s;
    row.host_restore_s = host->host_restore_s;
    row.host_ttft_s = host->host_ttft_s;
    row.offload_s = host->offload_s;
    row.blob_bytes = host->session_bytes;
    bar->add(2);
    EngineFlags f = opt.engine;
    // Disk tier, across a restart.
    std::error_code ec;
    fs::remove_all(disk, ec);
    f.kv_host_memory = std::string(1, '0');  // no host tier (a literal here trips a GCC 12 -Wrestrict false positive)
    f.kv_disk = disk.string();
    f.kv_disk_max = "64GiB";
    auto eo = to_engine_options(f);
    if (!eo) return fail(eo.message());
    std::vector<int32_t> next;
    {
      auto engine = Engine::create(model, tok, *eo);
      if (!engine) return fail(engine.message());
      auto t1 = one_token_turn(**engine, prompt, "s");
      if (!t1) return fail(t1.message());
      next = prompt;
      next.insert(next.end(), t1->tokens.begin(), t1->tokens.end());
      next.push_back(d(rng));
    }
    {
      auto engine = Engine::create(model, tok, *eo);
      if (!engine) return fail(engine.message());
      auto t2 = one_token_turn(**engine, next, "s");
      if (!t2) return fail(t2.message());
      (*engine)->wait_idle();
      const SessionTierStats st = (*engine)->stats().tiers;
      if (st.restores != 1 || t2->usage.cached_tokens != n)
        return fail(fmt::format("context {}: the disk tier did not restore the session (restores {}, cached {})", n,
                                st.restores, t2->usage.cached_tokens));
      row.disk_restore_s = st.restore_seconds;
      row.disk_ttft_s = t2->timing.prefill_seconds;
    }
    fs::remove_all(disk, ec);
    bar->add(1);
    rows.push_back(row);
  }
  if (bar) bar->finish();
  const SchedulerOptions so = to_engine_options(opt.engine)->scheduler;
  fmt::print("\ntangram bench-restore: {} | KV policy {} at ratio {} | KV {}\n", loaded->path,
             kv_policy_name(so.compression.policy), so.compression.ratio, kv_type_name(so.kv_type));
  if (!rows.empty())
    fmt::print("\n{:>8} {:>10} {:>11} {:>11} {:>9} {:>11} {:>9} {:>10} {:>10}\n", "context", "session KV", "re-prefill",
               "host", "x faster", "disk", "x faster", "offload", "TTFT host");
  nlohmann::json j = nlohmann::json::array();
  for (const Row& r : rows) {
    fmt::print("{:>8} {:>10} {:>9.1f}ms {:>9.2f}ms {:>8.1f}x {:>9.2f}ms {:>8.1f}x {:>8.2f}ms {:>8.1f}ms\n", r.context,
               format_bytes(static_cast<double>(r.blob_bytes)), 1e3 * r.reprefill_s, 1e3 * r.host_restore_s,
               r.reprefill_s / std::max(r.host_restore_s, 1e-9), 1e3 * r.disk_restore_s,
               r.reprefill_s / std::max(r.disk_restore_s, 1e-9), 1e3 * r.offload_s, 1e3 * r.host_ttft_s);
    j.push_back({{"context", r.context}, {"session_bytes", r.blob_bytes}, {"prefill_s", r.prefill_s},
                 {"reprefill_s", r.reprefill_s}, {"host_restore_s", r.host_restore_s}, {"host_ttft_s", r.host_ttft_s},
                 {"disk_restore_s", r.disk_restore_s}, {"disk_ttft_s", r.disk_ttft_s}, {"offload_s", r.offload_s}});
  }
  if (!rows.empty())
    fmt::print("\nre-prefill: time to first token of the next turn without the session; host / disk: the "
               "scheduler's restore time (fetch, checks, decode into the pool). Goal: 10x faster than re-prefill.\n");
  nlohmann::json workload;
  if (opt.workload.sessions > 0) {
    OversubscribedOptions w = opt.workload;
    if (w.disk_dir.empty() && !opt.disk_dir.empty()) w.disk_dir = opt.disk_dir;
    auto figures = run_oversubscribed(model, tok, opt.engine, w);
    if (!figures) return fail(figures.message());
    workload = std::move(*figures);
  }
  if (!opt.json_out.empty()) {
    nlohmann::json out = {{"restore", j}};
    if (!workload.is_null()) out["oversubscribed"] = workload;
    std::ofstream(opt.json_out) << out.dump(2) << "\n";
  }
  return 0;
}

Command register_bench_restore(CLI::App& app) {
  auto opt = std::make_shared<BenchRestoreOptions>();
  BenchRestoreOptions& br = *opt;
  auto* c_br = app.add_subcommand(
      "bench-restore", "Time to restore an idle session from host memory and from disk vs re-prefilling it");
  c_br->add_option("-m,--model", br.model, "Benchmark this GGUF instead of the generated default")->check(CLI::ExistingFile);
  c_br->add_option("--preset", br.preset, "Attention shape of the generated model")->capture_default_str();
  c_br->add_option("--type", br.type, "Weight type of the generated model")->capture_default_str();
  c_br->add_option("--layers", br.layers, "Layers of the generated model")->capture_default_str();
  c_br->add_option("--cache-dir", br.cache_dir, "Where generated models are kept");
  c_br->add_option("--contexts", br.contexts, "Session lengths in tokens")->capture_default_str()->delimiter(',');
  c_br->add_option("--disk-dir", br.disk_dir, "Folder for the disk tier (default: a temporary one)");
  c_br->add_option("--json", br.json_out, "Write the figures as JSON");
  c_br->add_flag("--quick", br.quick, "Contexts 512 and 1024");
  c_br->add_option("--sessions", br.workload.sessions,
                   "Also run an oversubscribed multi-turn workload of this many conversations (e.g. 40) with "
                   "no tiers, the host tier and the disk tier")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  c_br->add_option("--oversubscription", br.workload.oversubscription,
                   "Conversations per conversation the KV pool holds resident")->capture_default_str()
      ->check(CLI::Range(1.0, 1000.0));
  c_br->add_option("--turns", br.workload.turns, "Turns per conversation")->capture_default_str()
      ->check(CLI::Range(2, 100));
  c_br->add_option("--first-tokens", br.workload.first_tokens, "First turn's prompt tokens")->capture_default_str()
      ->check(CLI::PositiveNumber);
  c_br->add_option("--followup-tokens", br.workload.followup_tokens, "New tokens of each later turn")
      ->capture_default_str()->check(CLI::PositiveNumber);
  c_br->add_option("--gen-tokens", br.workload.gen_tokens, "Tokens generated per turn")->capture_default_str()
      ->check(CLI::PositiveNumber);
  c_br->add_option("--concurrency", br.workload.concurrency, "Turns in flight at once")->capture_default_str()
      ->check(CLI::Range(1, 256));
  c_br->add_flag("--workload-only", br.workload_only, "Only the --sessions workload, not the per-context table");
  add_engine_options(c_br, br.engine);
  return {c_br, [opt] { return cmd_bench_restore(*opt); }, {}};
}

}  // namespace tangram::cli
