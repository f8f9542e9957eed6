// `tangram bench-batch`: how decode throughput grows with the number of sequences decoded
// together. For each concurrency c, c requests with distinct random prompts are submitted at
// once to one engine; every token's arrival time is recorded. The steady-state window runs from
// the moment the last sequence produced its first token (all c are decoding) to the moment the
// first sequence finished; tokens inside it over its length are the decode tok/s at c. Each
// step streams the weights once for all c sequences plus every sequence's KV, so the table
// converts tok/s into those bytes per second against the machine's measured read bandwidth.
#include <memory>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/bench_models.h"
#include "cli/cli_error.h"
#include "cli/commands.h"
#include "common/progress.h"
#include "common/svg_plot.h"
#include "common/units.h"
#include "engine/engine.h"
#include "kernels/memory_bandwidth.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tangram::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Level {
  int concurrency = 0;
  double decode_tok_s = 0;   // steady state, all sequences decoding
  double e2e_tok_s = 0;      // generated tokens / wall time from submission to the last finish
  double step_ms = 0;        // one decode step (c tokens)
  double weight_gbps = 0;    // weights streamed per second (once per step)
  double kv_gbps = 0;        // KV read per second (each token reads its sequence's KV)
  double peak_fraction = 0;  // (weights + KV) / measured read bandwidth
  int64_t preemptions = 0;
};

Result<Level> measure_level(Engine& engine, int c, const BenchBatchOptions& opt, int64_t vocab,
                            double weight_bytes, double kv_bytes_per_token, double peak_gbps) {
  std::mutex mu;
  std::vector<std::vector<Clock::time_point>> times(static_cast<size_t>(c));
  for (auto& t : times) t.reserve(static_cast<size_t>(opt.gen_tokens));
  std::vector<Request> batch;
  std::mt19937 rng(static_cast<uint32_t>(1000 + c));
  std::uniform_int_distribution<int32_t> tok(3, static_cast<int32_t>(std::min<int64_t>(vocab, 32000) - 1));
  const int64_t preempt0 = engine.stats().preemptions;
  const auto t0 = Clock::now();
  for (int i = 0; i < c; ++i) {
    Request r;
    r.prompt.resize(static_cast<size_t>(opt.prompt_tokens));
    for (auto& t : r.prompt) t = tok(rng);
    r.params.temperature = 0;
    r.params.max_tokens = opt.gen_tokens;
    r.params.ignore_eos = true;
    auto* slot = &times[static_cast<size_t>(i)];
    r.on_token = [slot, &mu](const TokenEvent&) {
      std::lock_guard lock(mu);
      slot->push_back(Clock::now());
    };
    batch.push_back(std::move(r));
  }
  // All at once, so every sequence starts in the same step.
  TG_TRY(engine.submit_batch(std::move(batch)));
  engine.wait_idle();
  const auto t1 = Clock::now();

  Level lv;
  lv.concurrency = c;
  auto first = Clock::time_point::min();
  auto last = Clock::time_point::max();
  int64_t total = 0;
  for (const auto& t : times) {
    if (t.empty()) return make_error("a sequence produced no tokens");
    first = std::max(first, t.front());
    last = std::min(last, t.back());
    total += static_cast<int64_t>(t.size());
  }
  int64_t in_window = 0;
  for (const auto& t : times)
    for (const auto& x : t) in_window += (x > first && x <= last) ? 1 : 0;
  const double window = std::chrono::duration<double>(last - first).count();
  if (window <= 0 || in_window == 0)
    return make_error("no steady decode window at concurrency {}: raise --gen-tokens", c);
  lv.decode_tok_s = static_cast<double>(in_window) / window;
  lv.e2e_tok_s = static_cast<double>(total) / std::chrono::duration<double>(t1 - t0).count();
  const double steps_s = lv.decode_tok_s / c;
  lv.step_ms = 1000.0 / steps_s;
  lv.weight_gbps = steps_s * weight_bytes / 1e9;
  // Mid-window context of a sequence: its prompt and about half its answer.
  const double ctx = opt.prompt_tokens + opt.gen_tokens / 2.0;
  lv.kv_gbps = lv.decode_tok_s * ctx * kv_bytes_per_token / 1e9;
  lv.peak_fraction = (lv.weight_gbps + lv.kv_gbps) / peak_gbps;
  lv.preemptions = engine.stats().preemptions - preempt0;
  return lv;
}

}  // namespace

int cmd_bench_batch(const BenchBatchOptions& in_opt) {
  BenchBatchOptions opt = in_opt;
  if (opt.quick) {
    opt.prompt_tokens = std::min(opt.prompt_tokens, 64);
    opt.gen_tokens = std::min(opt.gen_tokens, 24);
  }
  if (opt.concurrency.empty()) return fail("--concurrency needs at least one value");
  for (int c : opt.concurrency)
    if (c < 1) return fail(fmt::format("--concurrency values must be positive, not {}", c));
  auto loaded = load_model_for_serving(opt.model, opt.preset, opt.type, opt.quick ? 8 : 0, opt.cache_dir,
                                       opt.engine.threads, model_batch_for(opt.engine));
  if (!loaded) return fail(loaded.message());
  const std::string& path = loaded->path;
  auto* model = &loaded->model;
  auto* tok = &loaded->tokenizer;
  const ModelConfig& cfg = (*model)->config();

  const int c_max = *std::max_element(opt.concurrency.begin(), opt.concurrency.end());
  const double elem = opt.engine.kv_type == "f32" ? 4.0 : 2.0;
  const double kv_bytes_per_token =
      static_cast<double>(cfg.n_layers) * cfg.n_kv_head * (cfg.head_dim + cfg.head_dim_v) * elem;
  EngineFlags flags = opt.engine;
  flags.max_running = std::max(flags.max_running, c_max);
  if (flags.kv_memory == "auto") {
    // Every sequence's whole conversation resident at once, with a page of slack per group.
    const double need = c_max * (opt.prompt_tokens + opt.gen_tokens + 2.0 * flags.page_tokens) *
                        kv_bytes_per_token * 1.1;
    flags.kv_memory = fmt::format("{}", static_cast<uint64_t>(need) + (64u << 20));
  }
  auto eo = to_engine_options(flags);
  if (!eo) return fail(eo.message());
  eo->scheduler.keep_sessions = false;
  if (flags.step_tokens < c_max)
    return fail(fmt::format("--step-tokens {} is below the largest concurrency {}", flags.step_tokens, c_max));

  auto engine = Engine::create(**model, **tok, *eo);
  if (!engine) return fail(engine.message());
  ThreadPool bw_pool(eo->threads);
  fmt::print("measuring memory read bandwidth ({} threads)...\n", bw_pool.size());
  const double peak = measure_read_bandwidth(bw_pool).read_gbps;
  const DecodeCost cost = decode_cost(**model);

  std::vector<Level> levels;
  {
    ProgressBar bar("decoding", static_cast<int64_t>(opt.concurrency.size()));
    for (int c : opt.concurrency) {
      auto lv = measure_level(**engine, c, opt, cfg.vocab, cost.weight_bytes, kv_bytes_per_token, peak);
      if (!lv) return fail(lv.message());
      levels.push_back(*lv);
      bar.add();
    }
  }

  const SchedulerOptions& so = (*engine)->options();
  fmt::print("\n{}: {} layers, {} KV heads x {} dims, weights {} per step | KV {} per token ({}), "
             "pages of {} tokens x {} heads | prompt {} + {} generated tokens per sequence | {} threads | "
             "peak read bandwidth {:.1f} GB/s\n\n",
             path, cfg.n_layers, cfg.n_kv_head, cfg.head_dim, format_bytes(cost.weight_bytes),
             format_bytes(kv_bytes_per_token), kv_type_name(so.kv_type), so.page_tokens,
             so.page_group_size, opt.prompt_tokens, opt.gen_tokens, (*engine)->threads(), peak);
  fmt::print("{:>11} {:>13} {:>9} {:>9} {:>12} {:>9} {:>9} {:>12} {:>8}\n", "concurrency", "decode tok/s",
             "vs c=1", "step ms", "weights GB/s", "KV GB/s", "of peak", "e2e tok/s", "preempt");
  const double base = levels.front().decode_tok_s / levels.front().concurrency;
  for (const Level& lv : levels)
    fmt::print("{:>11} {:>13.1f} {:>8.2f}x {:>9.1f} {:>12.1f} {:>9.2f} {:>8.0f}% {:>12.1f} {:>8}\n",
               lv.concurrency, lv.decode_tok_s, lv.decode_tok_s / base, lv.step_ms, lv.weight_gbps,
               lv.kv_gbps, 100.0 * lv.peak_fraction, lv.e2e_tok_s, lv.preemptions);
  fmt::print("\n'vs c=1' divides by the single-sequence rate (scaled to c=1 when it was not measured).\n");

  if (!opt.json_out.empty()) {
    nlohmann::json j;
    j["model"] = path;
    j["threads"] = (*engine)->threads();
    j["bandwidth_gbps"] = peak;
    j["prompt_tokens"] = opt.prompt_tokens;
    j["gen_tokens"] = opt.gen_tokens;
    for (const Level& lv : levels)
      j["levels"].push_back({{"concurrency", lv.concurrency}, {"decode_tok_s", lv.decode_tok_s},
                             {"e2e_tok_s", lv.e2e_tok_s}, {"step_ms", lv.step_ms},
                             {"weight_gbps", lv.weight_gbps}, {"kv_gbps", lv.kv_gbps},
                             {"peak_fraction", lv.peak_fraction}, {"preemptions", lv.preemptions}});
    std::ofstream(opt.json_out) << j.dump(2) << "\n";
    fmt::print("figures written to {}\n", opt.json_out);
  }
  if (!opt.svg_out.empty()) {
    LinePlot plot;
    plot.title = "Decode throughput with continuous batching";
    plot.x_label = "concurrent sequences";
    plot.y_label = "decode tok/s";
    plot.log2_x = true;
    PlotSeries s{"tangram", {}, {}};
    for (const Level& lv : levels) {
      s.x.push_back(lv.concurrency);
      s.y.push_back(lv.decode_tok_s);
    }
    plot.series.push_back(std::move(s));
    if (auto st = write_svg(plot, opt.svg_out); !st) return fail(st.message());
    fmt::print("plot written to {}\n", opt.svg_out);
  }
  return 0;
}

Command register_bench_batch(CLI::App& app) {
  auto opt = std::make_shared<BenchBatchOptions>();
  BenchBatchOptions& bb = *opt;
  bb.engine.kv_memory = "auto";  // sized for every sequence of the largest concurrency
  auto* c_bb = app.add_subcommand(
      "bench-batch", "Decode tok/s against the number of concurrent sequences (continuous batching)");
  c_bb->add_option("-m,--model", bb.model, "Benchmark this GGUF instead of a generated model")
      ->check(CLI::ExistingFile);
  c_bb->add_option("--preset", bb.preset, "Shape of the generated model")->capture_default_str();
  c_bb->add_option("--type", bb.type, "Weight type of the generated model")->capture_default_str();
  c_bb->add_option("--concurrency", bb.concurrency, "Concurrent sequences to measure")
      ->capture_default_str()->delimiter(',');
  c_bb->add_option("--prompt-tokens", bb.prompt_tokens, "Prompt length of each sequence")->capture_default_str()
      ->check(CLI::PositiveNumber);
  c_bb->add_option("--gen-tokens", bb.gen_tokens, "Tokens each sequence decodes")->capture_default_str()
      ->check(CLI::Range(2, 100000));
  c_bb->add_option("--cache-dir", bb.cache_dir, "Where generated models are kept (default ~/.cache/tangram/models)");
  c_bb->add_option("--json", bb.json_out, "Also write the figures as JSON to this file");
  c_bb->add_option("--svg", bb.svg_out, "Also plot tok/s against concurrency to this SVG file");
  c_bb->add_flag("--quick", bb.quick, "8 layers, fewer tokens: a run of well under a minute");
  add_engine_options(c_bb, bb.engine);
  return {c_bb, [opt] { return cmd_bench_batch(*opt); }, {}};
}

}  // namespace tangram::cli
