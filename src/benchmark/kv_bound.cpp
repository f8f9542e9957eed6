#include "benchmark/kv_bound.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "attention/attention_planner.h"
#include "common/units.h"
#include "compress/kv_policy.h"
#include "evaluation/synthetic_kv.h"
#include "kernels/memory_bandwidth.h"
#include "kv/block_pool.h"
#include "kv/kv_row.h"
#include "kv/paged_kv_cache.h"

namespace tangram::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kWarmupSteps = 2;  // untimed steps first: plans made, pages touched

size_t sz(int64_t n) { return static_cast<size_t>(n); }

PageGeometry geometry_of(const ModelConfig& cfg, int page_tokens, int group_size, KvType type) {
  PageGeometry geo;
  geo.page_tokens = page_tokens;
  geo.group_size = group_size;
  geo.head_dim = cfg.head_dim;
  geo.head_dim_v = cfg.head_dim_v;
  geo.type = type;
  return geo;
}

// c sequences of one layout, filled, in a pool with room for the decode steps' growth.
struct FilledBatch {
  std::unique_ptr<BlockPool> pool;
  std::vector<std::unique_ptr<PagedKvCache>> caches;
};

Result<FilledBatch> fill_batch(const Model& model, const SyntheticKvLayout& layout, KvType type,
                               int c, int64_t context, int growth, const SyntheticKvOptions& so) {
  const int p = so.page_tokens;
  const PageGeometry geo = geometry_of(model.config(), p, layout.group_size, type);
  const int64_t grow_pages = int64_t{layout.map->total_groups()} * ((growth + p - 1) / p + 1);
  const int64_t pages = c * (layout.footprint_pages(p) + grow_pages);
  FilledBatch b;
  TG_ASSIGN(b.pool, BlockPool::create(geo, sz(pages) * geo.page_bytes()));
  for (int i = 0; i < c; ++i) {
    TG_ASSIGN(std::unique_ptr<PagedKvCache> cache,
              PagedKvCache::create(model.kv_shape(), context + growth + 1, *b.pool, layout.map));
    TG_TRY(fill_synthetic_kv(*cache, layout, context, so, static_cast<uint32_t>(7 + i)));
    b.caches.push_back(std::move(cache));
  }
  return b;
}

// KV bytes one decode step's attention reads: every stored key and value row once.
double kv_read_bytes(const FilledBatch& b) {
  const PageGeometry& geo = b.pool->geometry();
  double rows = 0;
  for (const auto& c : b.caches) rows += static_cast<double>(c->used_slots());
  return rows * static_cast<double>(geo.key_row_bytes() + geo.value_row_bytes());
}

// Attention's clocks read around every layer (two syscalls per thread and layer) while it
// lives: on for the timed steps, off again however they end.
class AttentionTiming {
 public:
  explicit AttentionTiming(Model& model) : model_(model) { model_.time_attention(true); }
  ~AttentionTiming() { model_.time_attention(false); }
  AttentionTiming(const AttentionTiming&) = delete;
  AttentionTiming& operator=(const AttentionTiming&) = delete;

 private:
  Model& model_;
};

// Times `steps` decode steps of every sequence of the batch together.
Status time_steps(Model& model, ThreadPool& pool, FilledBatch& b, int steps, KvBoundRun& run) {
  const int c = static_cast<int>(b.caches.size());
  const int64_t vocab = model.config().vocab;
  std::vector<int32_t> tokens(sz(c));
  std::vector<float> logits(sz(int64_t{c} * vocab));  // [c][vocab]
  std::vector<SequenceStep> seqs(sz(c));
  auto step = [&](int k) {
    for (int i = 0; i < c; ++i) {
      tokens[sz(i)] = static_cast<int32_t>((7 * i + k) % vocab);
      PagedKvCache& cache = *b.caches[sz(i)];
      seqs[sz(i)] = SequenceStep{&cache, &tokens[sz(i)], 1, cache.n_positions(),
                                 logits.data() + int64_t{i} * vocab};
    }
    return model.forward_step(seqs, pool);
  };
  for (int k = 0; k < kWarmupSteps; ++k) TG_TRY(step(k));
  const AttentionTiming timing(model);
  const double bytes_before = kv_read_bytes(b);
  const double attention0 = model.attention_seconds();
  const double attention_cpu0 = model.attention_cpu_seconds();
  // The pool's clock, as attention's: the step's CPU less attention's is the rest of the step.
  const double cpu0 = pool.cpu_seconds();
  const auto t0 = Clock::now();
  for (int k = 0; k < steps; ++k) TG_TRY(step(kWarmupSteps + k));
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = pool.cpu_seconds() - cpu0;
  const double attention = model.attention_seconds() - attention0;
  const double attention_cpu = model.attention_cpu_seconds() - attention_cpu0;
  // Heads grow by a row per step: the mean step reads the mean of the first and last.
  run.kv_read_bytes = (bytes_before + kv_read_bytes(b)) / 2;
  run.step_ms = 1000.0 * seconds / steps;
  run.decode_tok_s = c * steps / seconds;
  run.attention_ms = 1000.0 * attention / steps;
  run.attention_share = attention / seconds;
  run.attention_gbps = attention > 0 ? run.kv_read_bytes * steps / attention / 1e9 : 0;
  run.step_cpu_ms = 1000.0 * cpu / steps;
  run.attention_cpu_ms = 1000.0 * attention_cpu / steps;
  run.attention_cpu_gbps_per_core =
      attention_cpu > 0 ? run.kv_read_bytes * steps / attention_cpu / 1e9 : 0;
  return Status::Ok();
}

Status check_options(const Model& model, const KvBoundOptions& opt) {
  if (opt.concurrency.empty())
    return make_error("--context needs --concurrency: the sequences decoded together");
  if (opt.policies.empty()) return make_error("--policies is empty");
  for (int c : opt.concurrency)
    if (c < 1) return make_error("--concurrency values must be positive, not {}", c);
  if (opt.steps < 1) return make_error("--gen-tokens must be positive");
  if (opt.page_tokens < 1)
    return make_error("--page-tokens must be positive, not {}", opt.page_tokens);
  if (opt.rounds < 1) return make_error("--rounds must be positive, not {}", opt.rounds);
  if (opt.kv_types.empty()) return make_error("--kv-type is empty");
  for (const KvType t : opt.kv_types)
    TG_TRY(check_kv_row_dims(t, model.config().head_dim, model.config().head_dim_v));
  const int64_t need = opt.context + kWarmupSteps + opt.steps;
  if (need > model.config().context_length)
    return make_error(
        "--context {} plus {} decode steps is {} positions, past the model's context of {} "
        "(a generated model can be made longer: tangram mkmodel --ctx)",
        opt.context, kWarmupSteps + opt.steps, need, model.config().context_length);
  return Status::Ok();
}

// The scattered probe taken for a page type (every type run has one).
const ColumnProbe& column_probe_of(const KvBoundDecode& d, const std::string& kv_type) {
  for (const ColumnProbe& p : d.column_probes)
    if (p.kv_type == kv_type) return p;
  static const ColumnProbe none;
  return none;
}

// "f16 8.00 KiB 12.3, q8_0 4.25 KiB 9.1": each type's column and its scattered probe rate.
std::string column_probes_text(const KvBoundDecode& d) {
  std::string text;
  for (const ColumnProbe& p : d.column_probes)
    text += fmt::format("{}{} {} {:.1f}", text.empty() ? "" : ", ", p.kv_type,
                        format_bytes(static_cast<double>(p.column_bytes)), p.cpu_gbps_per_core);
  return text;
}

// One round of one run: c sequences of the layout on `type` pages, filled, then timed.
Result<KvBoundRun> run_once(Model& model, ThreadPool& pool, const SyntheticKvLayout& layout,
                            KvPolicy policy, KvType type, int c, double full_bytes,
                            const KvBoundOptions& opt, const SyntheticKvOptions& so) {
  // As the scheduler does: tangram's plans are made ahead of time, the others' at every call.
  model.attention_planner().set_split(policy == KvPolicy::Tangram ? AttentionSplit::AheadOfTime
                                                                  : AttentionSplit::Runtime);
  const double page_bytes = static_cast<double>(
      geometry_of(model.config(), opt.page_tokens, layout.group_size, type).page_bytes());
  KvBoundRun run;
  run.policy = std::string(kv_policy_name(policy));
  run.kv_type = std::string(kv_type_name(type));
  run.concurrency = c;
  run.compressor_ratio = layout.compressor_ratio;
  TG_ASSIGN(FilledBatch batch,
            fill_batch(model, layout, type, c, opt.context, kWarmupSteps + opt.steps, so));
  run.pages_per_seq = batch.caches.front()->pages_held();
  run.bytes_per_token =
      static_cast<double>(run.pages_per_seq) * page_bytes / static_cast<double>(opt.context);
  run.retention_vs_full = static_cast<double>(run.pages_per_seq) * page_bytes / full_bytes;
  TG_TRY(time_steps(model, pool, batch, opt.steps, run));
  return run;
}

// The round with the median tok/s (the lower middle of an even count), every round's tok/s
// attached in round order.
KvBoundRun median_round(const std::vector<KvBoundRun>& rounds) {
  std::vector<size_t> order(rounds.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return rounds[a].decode_tok_s < rounds[b].decode_tok_s; });
  KvBoundRun median = rounds[order[(order.size() - 1) / 2]];
  for (const KvBoundRun& r : rounds) {
    median.round_tok_s.push_back(r.decode_tok_s);
    median.round_step_cpu_ms.push_back(r.step_cpu_ms);
  }
  return median;
}

// The spread of num[k] / den[k] over the rounds both have.
RatioSpread ratio_spread(const std::vector<double>& num, const std::vector<double>& den) {
  std::vector<double> ratios;
  for (size_t k = 0; k < num.size() && k < den.size(); ++k)
    if (num[k] > 0 && den[k] > 0) ratios.push_back(num[k] / den[k]);
  if (ratios.empty()) return {};
  std::sort(ratios.begin(), ratios.end());
  return {ratios[(ratios.size() - 1) / 2], ratios.front(), ratios.back()};
}

// Each run against full on the first page type at the same concurrency, round by round (the
// runs of one round were timed minutes apart at most). Left 0 when full was not run.
void set_ratios_to_full(std::vector<KvBoundRun>& runs, std::string_view first_type) {
  for (KvBoundRun& r : runs) {
    const KvBoundRun* full = nullptr;
    for (const KvBoundRun& f : runs)
      if (f.policy == "full" && f.kv_type == first_type && f.concurrency == r.concurrency)
        full = &f;
    if (full == nullptr) continue;
    r.vs_full = ratio_spread(r.round_tok_s, full->round_tok_s);
    r.vs_full_cpu = ratio_spread(full->round_step_cpu_ms, r.round_step_cpu_ms);
  }
}

}  // namespace

Result<KvBoundDecode> measure_kv_bound_decode(Model& model, ThreadPool& pool,
                                              const std::string& label, const KvBoundOptions& opt) {
  TG_TRY(check_options(model, opt));
  std::vector<KvPolicy> policies;
  for (const std::string& p : opt.policies) {
    TG_ASSIGN(KvPolicy policy, parse_kv_policy(p));
    policies.push_back(policy);
  }
  SyntheticKvOptions so;
  so.context = opt.context;
  so.ratio = opt.ratio;
  so.profile = opt.profile;
  so.page_tokens = opt.page_tokens;
  KvBoundDecode out;
  out.label = label;
  out.context = opt.context;
  out.page_tokens = opt.page_tokens;
  out.threads = pool.size();
  out.steps = opt.steps;
  out.rounds = opt.rounds;
  out.peak_gbps = opt.peak_gbps;
  // The probe again, in CPU time, right before the runs it is compared with (256 MiB is far past
  // any last-level cache).
  out.probe_cpu_gbps_per_core = measure_read_bandwidth(pool, size_t{256} << 20).cpu_gbps_per_core;
  for (const KvType t : opt.kv_types) {
    out.kv_types += fmt::format("{}{}", out.kv_types.empty() ? "" : ",", kv_type_name(t));
    ColumnProbe probe{std::string(kv_type_name(t)),
                      geometry_of(model.config(), opt.page_tokens, 1, t).column_bytes(), 0};
    TG_ASSIGN(const BandwidthResult scattered,
              measure_scattered_read_bandwidth(pool, probe.column_bytes));
    probe.cpu_gbps_per_core = scattered.cpu_gbps_per_core;
    out.column_probes.push_back(probe);
  }
  TG_ASSIGN(SyntheticKvLayout full,
            synthetic_kv_layout(KvPolicy::Full, model.config(), model.rope(), so));
  const double full_bytes = static_cast<double>(full.footprint_pages(opt.page_tokens)) *
                            static_cast<double>(geometry_of(model.config(), opt.page_tokens,
                                                            full.group_size, opt.kv_types.front())
                                                    .page_bytes());
  const AttentionSplit split_before = model.attention_planner().split();
  // Each policy's layout (tangram's fitted ratio included) is the same on every page type.
  std::vector<SyntheticKvLayout> layouts;
  for (const KvPolicy policy : policies) {
    TG_ASSIGN(SyntheticKvLayout layout,
              synthetic_kv_layout(policy, model.config(), model.rope(), so));
    layouts.push_back(std::move(layout));
  }
  // Every run once per round, in the same order each round.
  struct Slot {
    KvType type;
    size_t policy;  // index into policies and layouts
    int concurrency;
  };
  std::vector<Slot> slots;
  for (const KvType type : opt.kv_types)
    for (size_t p = 0; p < policies.size(); ++p)
      for (const int c : opt.concurrency) slots.push_back({type, p, c});
  std::vector<std::vector<KvBoundRun>> rounds(slots.size());  // [slot][round]
  for (int round = 0; round < out.rounds; ++round)
    for (size_t i = 0; i < slots.size(); ++i) {
      const Slot& s = slots[i];
      TG_ASSIGN(KvBoundRun run, run_once(model, pool, layouts[s.policy], policies[s.policy], s.type,
                                         s.concurrency, full_bytes, opt, so));
      rounds[i].push_back(std::move(run));
      if (opt.on_run_timed) opt.on_run_timed();
    }
  for (size_t i = 0; i < slots.size(); ++i) {
    KvBoundRun run = median_round(rounds[i]);
    run.bandwidth_fraction = opt.peak_gbps > 0 ? run.attention_gbps / opt.peak_gbps : 0;
    run.per_core_fraction = out.probe_cpu_gbps_per_core > 0
                                ? run.attention_cpu_gbps_per_core / out.probe_cpu_gbps_per_core
                                : 0;
    const double column_rate = column_probe_of(out, run.kv_type).cpu_gbps_per_core;
    run.column_probe_fraction = column_rate > 0 ? run.attention_cpu_gbps_per_core / column_rate : 0;
    out.runs.push_back(std::move(run));
  }
  set_ratios_to_full(out.runs, kv_type_name(opt.kv_types.front()));
  model.attention_planner().set_split(split_before);
  return out;
}

namespace {

// " in each of 5 rounds, run after run (the median round shown)", or nothing for one round.
std::string rounds_text(const KvBoundDecode& d) {
  if (d.rounds < 2) return "";
  return fmt::format(
      " in each of {} rounds, run after run (each run's median round shown; vs full: the median of "
      "its "
      "per-round ratios, least-most)",
      d.rounds);
}

// What every run shared, for the text and the markdown report: "every sequence holds ... GB/s
// per CPU-second".
std::string setup_text(const KvBoundDecode& d) {
  return fmt::format(
      "every sequence holds {} positions of synthetic KV (random rows written straight into the "
      "pages, "
      "no prefill), {} pages of {} tokens, {} threads, {} steps timed{}; read bandwidth {:.1f} "
      "GB/s, "
      "{:.1f} GB/s per CPU-second; over page columns in random order, the next prefetched "
      "(attention's "
      "pattern): {} GB/s per CPU-second",
      d.context, d.kv_types, d.page_tokens, d.threads, d.steps, rounds_text(d), d.peak_gbps,
      d.probe_cpu_gbps_per_core, column_probes_text(d));
}

// "3.21x", or with several rounds "3.21x (2.95-3.60)": the median per-round ratio and its range;
// "-" when full was not run.
std::string ratio_text(const KvBoundDecode& d, const RatioSpread& r) {
  if (r.median <= 0) return "-";
  if (d.rounds < 2) return fmt::format("{:.2f}x", r.median);
  return fmt::format("{:.2f}x ({:.2f}-{:.2f})", r.median, r.least, r.most);
}

}  // namespace

void print_kv_bound(const KvBoundDecode& d, std::FILE* console) {
  fmt::print(console, "\n{}: KV-bound decode, {}\n", d.label, setup_text(d));
  const int vs_width = d.rounds > 1 ? 17 : 11;
  fmt::print(console,
             "{:<8} {:<5} {:>6} {:>6} {:>9} {:>5} {:>10} {:>{}} {:>8} {:>8} {:>6} {:>10} {:>8} "
             "{:>6} {:>7} {:>{}} {:>8} {:>9} "
             "{:>6} {:>7}\n",
             "policy", "KV", "ratio", "kept", "KV/token", "seqs", "tok/s", "vs full", vs_width,
             "step ms", "attn ms", "attn%", "KV read", "attn GB/s", "of bw", "CPU ms",
             "CPU vs full", vs_width, "attn CPU", "GB/s/core", "of cpu", "of cols");
  for (const KvBoundRun& r : d.runs)
    fmt::print(console,
               "{:<8} {:<5} {:>6.3f} {:>5.1f}% {:>9} {:>5} {:>10.1f} {:>{}} {:>8.1f} {:>8.1f} "
               "{:>5.0f}% {:>10} {:>8.1f} "
               "{:>5.0f}% {:>7.1f} {:>{}} {:>8.1f} {:>9.1f} {:>5.0f}% {:>6.0f}%\n",
               r.policy, r.kv_type, r.compressor_ratio, 100.0 * r.retention_vs_full,
               format_bytes(r.bytes_per_token), r.concurrency, r.decode_tok_s,
               ratio_text(d, r.vs_full), vs_width, r.step_ms, r.attention_ms,
               100.0 * r.attention_share, format_bytes(r.kv_read_bytes), r.attention_gbps,
               100.0 * r.bandwidth_fraction, r.step_cpu_ms, ratio_text(d, r.vs_full_cpu), vs_width,
               r.attention_cpu_ms, r.attention_cpu_gbps_per_core, 100.0 * r.per_core_fraction,
               100.0 * r.column_probe_fraction);
  fmt::print(
      console,
      "ratio: what the Compressor was given (tangram: fitted to hold no more pages than uniform); "
      "kept: bytes "
      "per cached token over full's on the first KV type (effective retention; vs full likewise); "
      "KV read: K and V rows one step's attention reads; "
      "attn GB/s: that over attention's time; of bw: that over the read bandwidth; CPU ms, attn "
      "CPU: the step's "
      "and attention's CPU time (all threads); CPU vs full: full's step CPU time over the run's; "
      "GB/s/core: KV read per CPU-second of attention; of cpu: that over "
      "the probe's per CPU-second; of cols: that over the page-column probe's of the same type.\n");
}

nlohmann::json kv_bound_json(const KvBoundDecode& d) {
  nlohmann::json j = {{"label", d.label},
                      {"context", d.context},
                      {"page_tokens", d.page_tokens},
                      {"kv_types", d.kv_types},
                      {"threads", d.threads},
                      {"steps", d.steps},
                      {"rounds", d.rounds},
                      {"bandwidth_gbps", d.peak_gbps},
                      {"probe_cpu_gbps_per_core", d.probe_cpu_gbps_per_core},
                      {"column_probes", nlohmann::json::array()},
                      {"synthetic_kv", true},
                      {"runs", nlohmann::json::array()}};
  for (const ColumnProbe& p : d.column_probes)
    j["column_probes"].push_back({{"kv_type", p.kv_type},
                                  {"column_bytes", p.column_bytes},
                                  {"cpu_gbps_per_core", p.cpu_gbps_per_core}});
  for (const KvBoundRun& r : d.runs) {
    j["runs"].push_back({{"policy", r.policy},
                         {"kv_type", r.kv_type},
                         {"concurrency", r.concurrency},
                         {"compressor_ratio", r.compressor_ratio},
                         {"pages_per_sequence", r.pages_per_seq},
                         {"bytes_per_cached_token", r.bytes_per_token},
                         {"retention_vs_full", r.retention_vs_full},
                         {"decode_tok_s", r.decode_tok_s},
                         {"round_tok_s", r.round_tok_s},
                         {"vs_full", r.vs_full.median},
                         {"vs_full_min", r.vs_full.least},
                         {"vs_full_max", r.vs_full.most},
                         {"round_step_cpu_ms", r.round_step_cpu_ms},
                         {"vs_full_cpu", r.vs_full_cpu.median},
                         {"vs_full_cpu_min", r.vs_full_cpu.least},
                         {"vs_full_cpu_max", r.vs_full_cpu.most},
                         {"step_ms", r.step_ms},
                         {"attention_ms", r.attention_ms},
                         {"attention_share", r.attention_share},
                         {"kv_read_bytes_per_step", r.kv_read_bytes},
                         {"attention_gbps", r.attention_gbps},
                         {"bandwidth_fraction", r.bandwidth_fraction},
                         {"step_cpu_ms", r.step_cpu_ms},
                         {"attention_cpu_ms", r.attention_cpu_ms},
                         {"attention_cpu_gbps_per_core", r.attention_cpu_gbps_per_core},
                         {"per_core_fraction", r.per_core_fraction},
                         {"column_probe_fraction", r.column_probe_fraction}});
  }
  return j;
}

std::string kv_bound_markdown(const KvBoundDecode& d) {
  std::string md = fmt::format(
      "\n## KV-bound decode: {}\n\nIn this run {}.\n\n"
      "| policy | KV | ratio | kept vs full | KV per token | sequences | decode tok/s | vs full | "
      "step ms | attention ms "
      "| attention share | KV read per step | attention GB/s | of bandwidth | step CPU ms | step "
      "CPU vs full "
      "| attention CPU ms | attention GB/s per core | of probe per core | of column probe |\n"
      "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
      "---: | ---: | ---: | ---: "
      "| ---: | ---: | ---: |\n",
      d.label, setup_text(d));
  for (const KvBoundRun& r : d.runs)
    md += fmt::format(
        "| {} | {} | {:.3f} | {:.1f}% | {} | {} | {:.1f} | {} | {:.1f} | {:.1f} | {:.0f}% | {} | "
        "{:.1f} | {:.0f}% "
        "| {:.1f} | {} | {:.1f} | {:.1f} | {:.0f}% | {:.0f}% |\n",
        r.policy, r.kv_type, r.compressor_ratio, 100.0 * r.retention_vs_full,
        format_bytes(r.bytes_per_token), r.concurrency, r.decode_tok_s, ratio_text(d, r.vs_full),
        r.step_ms, r.attention_ms, 100.0 * r.attention_share, format_bytes(r.kv_read_bytes),
        r.attention_gbps, 100.0 * r.bandwidth_fraction, r.step_cpu_ms, ratio_text(d, r.vs_full_cpu),
        r.attention_cpu_ms, r.attention_cpu_gbps_per_core, 100.0 * r.per_core_fraction,
        100.0 * r.column_probe_fraction);
  return md;
}

}  // namespace tangram::bench
