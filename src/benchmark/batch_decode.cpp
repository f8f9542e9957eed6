#include "benchmark/batch_decode.h"

#include <algorithm>
#include <chrono>
#include <mutex>

#include <fmt/format.h>

#include "benchmark/decode_cost.h"
#include "common/cpu_time.h"
#include "common/units.h"
#include "engine/engine.h"
#include "evaluation/workload.h"
#include "launch/engine_settings.h"
#include "launch/model_loading.h"

namespace tangram::bench {
namespace {

using Clock = std::chrono::steady_clock;

// One token's arrival: wall clock and the process's CPU time then.
struct Arrival {
  Clock::time_point wall;
  double cpu_s = 0;
};

// Decode tok/s in the window where all c sequences decode, from every token's arrival time,
// and the process's CPU time over that window (on a loaded machine the wall rate measures the
// other jobs as much as the engine; the CPU rate does not).
Result<BatchDecodeLevel> steady_window(const std::vector<std::vector<Arrival>>& arrivals, int c,
                                       Clock::time_point t0, Clock::time_point t1) {
  BatchDecodeLevel lv;
  lv.concurrency = c;
  const Arrival* first = nullptr;  // the last sequence's first token
  const Arrival* last = nullptr;   // the first sequence's last token
  int64_t total = 0;
  for (const auto& a : arrivals) {
    if (a.empty()) return make_error("a sequence produced no tokens");
    if (first == nullptr || a.front().wall > first->wall) first = &a.front();
    if (last == nullptr || a.back().wall < last->wall) last = &a.back();
    total += static_cast<int64_t>(a.size());
  }
  if (first == nullptr || last == nullptr) return make_error("no sequences at concurrency {}", c);
  int64_t in_window = 0;
  for (const auto& a : arrivals)
    for (const Arrival& x : a) in_window += (x.wall > first->wall && x.wall <= last->wall) ? 1 : 0;
  const double window = std::chrono::duration<double>(last->wall - first->wall).count();
  if (window <= 0 || in_window == 0)
    return make_error("no steady decode window at concurrency {}: raise --gen-tokens", c);
  lv.decode_tok_s = static_cast<double>(in_window) / window;
  const double cpu = last->cpu_s - first->cpu_s;
  lv.decode_tok_s_cpu = cpu > 0 ? static_cast<double>(in_window) / cpu : 0;
  lv.e2e_tok_s = static_cast<double>(total) / std::chrono::duration<double>(t1 - t0).count();
  return lv;
}

Result<BatchDecodeLevel> measure_level(Engine& engine, int c, const BatchDecodeOptions& opt,
                                       int64_t vocab, double weight_bytes,
                                       double kv_bytes_per_token) {
  std::mutex mu;
  std::vector<std::vector<Arrival>> arrivals(static_cast<size_t>(c));
  for (auto& a : arrivals) a.reserve(static_cast<size_t>(opt.gen_tokens));
  std::vector<Request> batch;
  const int64_t preempt0 = engine.stats().preemptions;
  const auto t0 = Clock::now();
  for (int i = 0; i < c; ++i) {
    Request r;
    r.prompt = random_tokens(opt.prompt_tokens, vocab, static_cast<uint64_t>(1000 * c + i));
    r.params.temperature = 0;
    r.params.max_tokens = opt.gen_tokens;
    r.params.ignore_eos = true;
    auto* slot = &arrivals[static_cast<size_t>(i)];
    r.on_token = [slot, &mu](const TokenEvent&) {
      std::lock_guard lock(mu);
      slot->push_back(Arrival{Clock::now(), process_cpu_seconds()});
    };
    batch.push_back(std::move(r));
  }
  // All at once, so every sequence starts in the same step.
  TG_TRY(engine.submit_batch(std::move(batch)));
  engine.wait_idle();
  TG_ASSIGN(BatchDecodeLevel lv, steady_window(arrivals, c, t0, Clock::now()));
  const double steps_s = lv.decode_tok_s / c;
  lv.step_ms = 1000.0 / steps_s;
  lv.step_cpu_ms = lv.decode_tok_s_cpu > 0 ? 1000.0 * c / lv.decode_tok_s_cpu : 0;
  lv.weight_gbps = steps_s * weight_bytes / 1e9;
  // Mid-window context of a sequence: its prompt and about half its answer.
  const double ctx = opt.prompt_tokens + opt.gen_tokens / 2.0;
  lv.kv_gbps = lv.decode_tok_s * ctx * kv_bytes_per_token / 1e9;
  lv.peak_fraction = (lv.weight_gbps + lv.kv_gbps) / opt.peak_gbps;
  lv.preemptions = engine.stats().preemptions - preempt0;
  return lv;
}

}  // namespace

Result<BatchDecode> measure_batch_decode(Model& model, const Tokenizer& tok,
                                         const std::string& label, const BatchDecodeOptions& opt) {
  if (opt.concurrency.empty()) return make_error("--concurrency needs at least one value");
  for (int c : opt.concurrency)
    if (c < 1) return make_error("--concurrency values must be positive, not {}", c);
  const ModelConfig& cfg = model.config();
  const int c_max = *std::max_element(opt.concurrency.begin(), opt.concurrency.end());
  BatchDecode out;
  out.label = label;
  EngineSettings flags;
  flags.threads = opt.threads;
  out.kv_bytes_per_token = static_cast<double>(cfg.n_layers) * cfg.n_kv_head *
                           (cfg.head_dim + cfg.head_dim_v) * (flags.kv_type == "f32" ? 4.0 : 2.0);
  flags.max_running = std::max(flags.max_running, c_max);
  flags.step_tokens = std::max<int64_t>(flags.step_tokens, c_max);
  // Every sequence's whole conversation resident at once, with a page of slack per group.
  const double need = c_max * (opt.prompt_tokens + opt.gen_tokens + 2.0 * flags.page_tokens) *
                      out.kv_bytes_per_token * 1.1;
  flags.kv_memory = fmt::format("{}", static_cast<uint64_t>(need) + (64u << 20));
  TG_ASSIGN(EngineOptions eo, to_engine_options(flags));
  eo.scheduler.keep_sessions = false;
  TG_ASSIGN(std::unique_ptr<Engine> engine, Engine::create(model, tok, eo));
  out.page_tokens = static_cast<int>(engine->options().page_tokens);
  out.threads = engine->threads();
  const double weight_bytes = decode_cost(model).weight_bytes;
  for (int c : opt.concurrency) {
    TG_ASSIGN(BatchDecodeLevel lv,
              measure_level(*engine, c, opt, cfg.vocab, weight_bytes, out.kv_bytes_per_token));
    out.levels.push_back(lv);
  }
  return out;
}

void print_batch_decode(const BatchDecode& b, std::FILE* console) {
  fmt::print(console,
             "\n{}: continuous batching, KV {} per token, pages of {} tokens, {} threads\n",
             b.label, format_bytes(b.kv_bytes_per_token), b.page_tokens, b.threads);
  fmt::print(console, "{:>11} {:>13} {:>9} {:>9} {:>12} {:>12} {:>9} {:>9} {:>12} {:>8}\n",
             "concurrency", "decode tok/s", "vs c=1", "step ms", "step CPU ms", "weights GB/s",
             "KV GB/s", "of peak", "e2e tok/s", "preempt");
  if (b.levels.empty()) return;
  const double base = b.levels.front().decode_tok_s / b.levels.front().concurrency;
  for (const BatchDecodeLevel& lv : b.levels)
    fmt::print(console,
               "{:>11} {:>13.1f} {:>8.2f}x {:>9.1f} {:>12.1f} {:>12.1f} {:>9.2f} {:>8.0f}% "
               "{:>12.1f} {:>8}\n",
               lv.concurrency, lv.decode_tok_s, lv.decode_tok_s / base, lv.step_ms, lv.step_cpu_ms,
               lv.weight_gbps, lv.kv_gbps, 100.0 * lv.peak_fraction, lv.e2e_tok_s, lv.preemptions);
}

nlohmann::json batch_decode_json(const BatchDecode& b) {
  nlohmann::json j = {{"label", b.label},
                      {"kv_bytes_per_token", b.kv_bytes_per_token},
                      {"page_tokens", b.page_tokens},
                      {"threads", b.threads},
                      {"levels", nlohmann::json::array()}};
  for (const BatchDecodeLevel& lv : b.levels)
    j["levels"].push_back({{"concurrency", lv.concurrency},
                           {"decode_tok_s", lv.decode_tok_s},
                           {"e2e_tok_s", lv.e2e_tok_s},
                           {"step_ms", lv.step_ms},
                           {"decode_tok_s_cpu", lv.decode_tok_s_cpu},
                           {"step_cpu_ms", lv.step_cpu_ms},
                           {"weight_gbps", lv.weight_gbps},
                           {"kv_gbps", lv.kv_gbps},
                           {"peak_fraction", lv.peak_fraction},
                           {"preemptions", lv.preemptions}});
  return j;
}

LinePlot batch_decode_plot(const std::vector<BatchDecode>& runs) {
  LinePlot plot;
  plot.title = "Decode throughput with continuous batching";
  plot.x_label = "concurrent sequences";
  plot.y_label = "decode tok/s";
  plot.log2_x = true;
  for (const BatchDecode& b : runs) {
    PlotSeries s{b.label, {}, {}};
    for (const BatchDecodeLevel& lv : b.levels) {
      s.x.push_back(lv.concurrency);
      s.y.push_back(lv.decode_tok_s);
    }
    plot.series.push_back(std::move(s));
  }
  return plot;
}

}  // namespace tangram::bench
