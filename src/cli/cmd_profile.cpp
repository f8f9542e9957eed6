// `tangram profile`: measures how much of the context each (layer, KV head) keeps when the
// chosen scorer spreads a run-time budget (the dynamic policy at --kv-ratio, per-layer or
// cross-layer) over pilot samples, and writes the per-head statistics as a profile in the
// shared JSON schema (../shared/profiles), which the tangram policy turns into deterministic
// budgets. Each head is its own page group while profiling, so kept lengths are exact.
//
// It also reports whether the static premise holds: per-head spread over samples, the rank
// correlation of head orderings between samples, between the first and the last turn of each
// sample (a sample is cut into --turns growing prefixes, each one a turn of one conversation
// whose cache is compressed every turn), and between the kinds of text given (--samples
// repeated, one file per kind).
#include <memory>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/config_json.h"
#include "cli/cli_error.h"
#include "cli/commands.h"
#include "common/progress.h"
#include "compress/profile.h"
#include "evaluation/seeded_rng.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "scheduler/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace tangram::cli {
namespace {

struct Sample {
  std::vector<int32_t> tokens;
  int domain = 0;
};

// Samples of one file: JSON lines ({"text": ...}) or plain text split at lines "---"; text
// without separators is cut into pieces of sample_tokens tokens.
Result<std::vector<Sample>> read_samples(const std::string& path, int domain, const Tokenizer& tok,
                                         int64_t sample_tokens) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot read the samples file {}", path);
  std::vector<std::string> texts;
  std::string line;
  const bool jsonl = path.size() > 6 && path.substr(path.size() - 6) == ".jsonl";
  std::string current;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (jsonl) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object() || !j.contains("text") || !j["text"].is_string())
        return make_error("{} line {}: expected a JSON object with a \"text\" string", path, line_no);
      texts.push_back(j["text"].get<std::string>());
    } else if (line == "---" || line == "---\r") {
      if (!current.empty()) texts.push_back(std::move(current));
      current.clear();
    } else {
      current += line;
      current += '\n';
    }
  }
  if (!current.empty()) texts.push_back(std::move(current));
  std::vector<Sample> out;
  for (const std::string& t : texts) {
    std::vector<int32_t> ids = tok.encode(t, /*add_special=*/true, /*parse_special=*/false);
    if (texts.size() == 1 && static_cast<int64_t>(ids.size()) > sample_tokens) {
      for (size_t b = 0; b + static_cast<size_t>(sample_tokens) <= ids.size(); b += static_cast<size_t>(sample_tokens))
        out.push_back(Sample{std::vector<int32_t>(ids.begin() + static_cast<std::ptrdiff_t>(b),
                                                  ids.begin() + static_cast<std::ptrdiff_t>(b) + sample_tokens),
                             domain});
    } else if (!ids.empty()) {
      if (static_cast<int64_t>(ids.size()) > sample_tokens) ids.resize(static_cast<size_t>(sample_tokens));
      out.push_back(Sample{std::move(ids), domain});
    }
  }
  if (out.empty()) return make_error("{} holds no samples", path);
  return out;
}

// Without sample files (e.g. a generated model): two kinds of token sequences, random text and
// text built from a few repeated phrases, so the domain comparison still has two sides.
std::vector<Sample> synthetic_samples(int n, int64_t length, int64_t vocab) {
  std::vector<Sample> out;
  SeededRng rng(1234, 0);
  const int64_t token_end = std::min<int64_t>(vocab, 32000);
  auto tok = [&](SeededRng& r) { return static_cast<int32_t>(r.uniform_int(3, token_end)); };
  for (int i = 0; i < n; ++i) {
    Sample s;
    s.domain = i % 2;
    if (s.domain == 0) {
      for (int64_t t = 0; t < length; ++t) s.tokens.push_back(tok(rng));
    } else {
      std::vector<std::vector<int32_t>> phrases(6);
      for (auto& p : phrases)
        for (int t = 0; t < 12; ++t) p.push_back(tok(rng));
      while (static_cast<int64_t>(s.tokens.size()) < length) {
        const auto& p = phrases[static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(phrases.size())))];
        s.tokens.insert(s.tokens.end(), p.begin(), p.end());
      }
      s.tokens.resize(static_cast<size_t>(length));
    }
    out.push_back(std::move(s));
  }
  return out;
}

double retention(int64_t kept, int64_t total, int sink, int window) {
  const double r = static_cast<double>(std::max<int64_t>(kept - sink - window, 0)) /
                   static_cast<double>(std::max<int64_t>(total - sink, 1));
  return std::clamp(r, 0.0, 1.0);
}

std::vector<double> mean_over(const std::vector<std::vector<double>>& rows) {
  if (rows.empty()) return {};
  std::vector<double> m(rows[0].size(), 0.0);
  for (const auto& r : rows)
    for (size_t i = 0; i < m.size(); ++i) m[i] += r[i];
  for (auto& x : m) x /= static_cast<double>(rows.size());
  return m;
}

// Puts the kinds of text in turn (kind 0, kind 1, ..., kind 0, ...) so a cap on the number of
// samples keeps every kind.
std::vector<Sample> interleave_kinds(std::vector<Sample> samples) {
  std::vector<std::vector<Sample>> kinds;
  for (auto& s : samples) {
    if (kinds.size() <= static_cast<size_t>(s.domain)) kinds.resize(static_cast<size_t>(s.domain) + 1);
    kinds[static_cast<size_t>(s.domain)].push_back(std::move(s));
  }
  std::vector<Sample> out;
  for (size_t i = 0;; ++i) {
    bool any = false;
    for (auto& k : kinds)
      if (i < k.size()) {
        out.push_back(std::move(k[i]));
        any = true;
      }
    if (!any) break;
  }
  return out;
}

// The pilot samples: the --samples files (one kind of text each) or generated ones, interleaved
// by kind and capped at --n-samples.
Result<std::vector<Sample>> pilot_samples(const ProfileOptions& opt, const Tokenizer& tok, int64_t vocab) {
  std::vector<Sample> samples;
  for (size_t f = 0; f < opt.samples.size(); ++f) {
    auto got = read_samples(opt.samples[f], static_cast<int>(f), tok, opt.sample_tokens);
    if (!got) return got.error();
    samples.insert(samples.end(), got->begin(), got->end());
  }
  if (opt.samples.empty()) samples = synthetic_samples(opt.n_samples, opt.sample_tokens, vocab);
  samples = interleave_kinds(std::move(samples));
  if (static_cast<int>(samples.size()) > opt.n_samples) samples.resize(static_cast<size_t>(opt.n_samples));
  return samples;
}

// A scheduler that compresses every turn in one shot with the dynamic policy, each head its own
// page group so that kept lengths are exact.
SchedulerOptions profiling_scheduler_options(const ProfileOptions& opt, const ModelConfig& cfg, BudgetLevel level) {
  const int64_t ctx_limit = std::min<int64_t>(cfg.context_length, opt.sample_tokens + 8);
  SchedulerOptions so;
  so.page_group_size = 1;  // every head its own group: exact kept lengths
  so.page_tokens = 16;
  so.kv_type = KvType::F16;
  so.prefault = false;
  so.max_context = ctx_limit;
  const double kv_per_token = static_cast<double>(cfg.n_layers) * cfg.n_kv_head * (cfg.head_dim + cfg.head_dim_v) * 2.0;
  so.kv_memory = static_cast<size_t>(kv_per_token * static_cast<double>(ctx_limit + 64) * 1.3) + (16u << 20);
  CompressionOptions& co = so.compression;
  co.policy = KvPolicy::Dynamic;
  co.ratio = opt.ratio;
  co.level = level;
  co.sink = opt.sink;
  co.window = opt.window;
  co.chunk = std::max<int64_t>(opt.sample_tokens + 1, opt.window + 1);  // one-shot per turn
  co.scorer.name = opt.scorer;
  return so;
}

// The profile's description (model, shape, settings), before any sample is measured.
RetentionProfile empty_profile(const ProfileOptions& opt, const Model& model, BudgetLevel level) {
  const ModelConfig& cfg = model.config();
  RetentionProfile prof;
  prof.scorer = opt.scorer;
  prof.model = model.gguf().get_string("general.name").value_or(opt.model);
  prof.level = level == BudgetLevel::CrossLayer ? "cross-layer" : "per-layer";
  prof.n_layers = cfg.n_layers;
  prof.n_kv_head = cfg.n_kv_head;
  prof.n_physical_layers = cfg.n_layers;
  for (int l = 0; l < cfg.n_layers; ++l) prof.layer_ids.push_back(l);
  prof.base_ratio = opt.ratio;
  prof.sink = opt.sink;
  prof.window = opt.window;
  return prof;
}

// Per-head retention [sample][layer * n_kv_head + head] after the first and after the last turn.
struct TurnRetention {
  std::vector<std::vector<double>> first_turn, last_turn;
};

// Runs every sample as a conversation of opt.turns growing prefixes and records each head's kept
// length after the first and the last turn; the last turn's figures also go into prof's raw data.
Status measure_samples(Scheduler& sched, const std::vector<Sample>& samples, const ProfileOptions& opt,
                       RetentionProfile& prof, TurnRetention& turns) {
  const int L = prof.n_layers, H = prof.n_kv_head;
  const size_t heads = static_cast<size_t>(L) * static_cast<size_t>(H);
  ProgressBar bar("profiling", static_cast<int64_t>(samples.size()));
  for (size_t i = 0; i < samples.size(); ++i) {
    const Sample& smp = samples[i];
    const std::string sid = fmt::format("profile-{}", i);
    for (int t = 0; t < opt.turns; ++t) {
      const size_t len = smp.tokens.size() * static_cast<size_t>(t + 1) / static_cast<size_t>(opt.turns);
      if (len < 2) continue;
      Request r;
      r.prompt.assign(smp.tokens.begin(), smp.tokens.begin() + static_cast<std::ptrdiff_t>(len));
      r.params.temperature = 0;
      r.params.max_tokens = 1;
      r.session_id = sid;
      std::string error;
      r.on_finish = [&error](const RequestResult& res) {
        if (res.finish == FinishReason::Error) error = res.error;
      };
      if (auto id = sched.submit(std::move(r)); !id) return id.error();
      sched.run_until_idle();
      if (!error.empty()) return Error{error};
      const Session* ses = sched.sessions().find(sid);
      if (ses == nullptr || !ses->cache) return make_error("the profiled session lost its cache");
      const int64_t total = ses->cache->n_positions();
      std::vector<double> ret(heads);
      std::vector<int32_t> kept(heads);
      for (int l = 0; l < L; ++l)
        for (int h = 0; h < H; ++h) {
          const int64_t k = ses->cache->length(l, h);
          kept[static_cast<size_t>(l * H + h)] = static_cast<int32_t>(k);
          ret[static_cast<size_t>(l * H + h)] = retention(k, total, opt.sink, opt.window);
        }
      if (t == 0) turns.first_turn.push_back(ret);
      if (t == opt.turns - 1) {
        turns.last_turn.push_back(ret);
        prof.raw_ratio.insert(prof.raw_ratio.end(), ret.begin(), ret.end());
        prof.raw_kept.insert(prof.raw_kept.end(), kept.begin(), kept.end());
        prof.sample_meta.insert(prof.sample_meta.end(), {static_cast<int32_t>(total - opt.sink), opt.sink,
                                                         static_cast<int32_t>(total), opt.window});
      }
    }
    sched.drop_session(sid);
    bar.add();
  }
  return Status::Ok();
}

// Median, p90, mean and standard deviation over samples of each head's retention.
void set_head_statistics(RetentionProfile& prof, const std::vector<std::vector<double>>& last_turn) {
  const size_t heads = static_cast<size_t>(prof.n_layers) * static_cast<size_t>(prof.n_kv_head);
  prof.median.resize(heads);
  prof.p90.resize(heads);
  prof.std_dev.resize(heads);
  prof.mean.resize(heads);
  for (size_t h = 0; h < heads; ++h) {
    std::vector<double> v;
    for (const auto& s : last_turn) v.push_back(s[h]);
    std::sort(v.begin(), v.end());
    double mean = 0;
    for (double x : v) mean += x;
    mean /= static_cast<double>(v.size());
    double var = 0;
    for (double x : v) var += (x - mean) * (x - mean);
    auto quantile = [&](double q) {
      const double pos = q * static_cast<double>(v.size() - 1);
      const auto lo = static_cast<size_t>(std::floor(pos));
      const size_t hi = std::min(lo + 1, v.size() - 1);
      return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
    };
    prof.median[h] = static_cast<float>(quantile(0.5));
    prof.p90[h] = static_cast<float>(quantile(0.9));
    prof.mean[h] = static_cast<float>(mean);
    prof.std_dev[h] = static_cast<float>(std::sqrt(var / static_cast<double>(v.size())));
  }
}

// Prints whether the static premise holds: spread of each head over samples, and how stable the
// ordering of heads is across samples, turns and kinds of text.
void print_stability(const RetentionProfile& prof, const ProfileOptions& opt, const TurnRetention& turns,
                     const std::vector<Sample>& samples) {
  const ProfileStability stab = profile_stability(prof);
  fmt::print("\nprofile of {} ({} layers x {} KV heads), scorer {}, ratio {}, level {}, {} samples, "
             "sink {} window {}: written to {}\n",
             prof.model, prof.n_layers, prof.n_kv_head, opt.scorer, opt.ratio, prof.level, prof.n_samples, opt.sink,
             opt.window, opt.out);
  double lo = 1, hi = 0, avg = 0;
  for (float m : prof.mean) {
    lo = std::min<double>(lo, m);
    hi = std::max<double>(hi, m);
    avg += static_cast<double>(m);
  }
  avg /= static_cast<double>(prof.mean.size());
  fmt::print("per-head retention (mean over samples): min {:.3f}, mean {:.3f}, max {:.3f}\n", lo, avg, hi);
  fmt::print("spread over samples: std mean {:.3f} max {:.3f}; p90 - median mean {:.3f} max {:.3f}; "
             "{:.0f}% of heads with std < 0.05\n",
             stab.mean_std, stab.max_std, stab.mean_p90_gap, stab.max_p90_gap, 100.0 * stab.intrinsic_coverage);
  fmt::print("head ordering across samples (Spearman vs the mean ordering): all heads mean {:.3f} min "
             "{:.3f}; within layers mean {:.3f} min {:.3f}\n",
             stab.global_spearman_mean, stab.global_spearman_min, stab.per_layer_spearman_mean,
             stab.per_layer_spearman_min);
  if (opt.turns > 1) {
    const auto a = mean_over(turns.first_turn), b = mean_over(turns.last_turn);
    const auto rho = spearman(a, b);
    fmt::print("head ordering across turns (turn 1 vs turn {}): Spearman {}\n", opt.turns,
               rho ? fmt::format("{:.3f}", *rho) : std::string("undefined"));
  }
  std::vector<std::vector<std::vector<double>>> by_domain;
  for (size_t i = 0; i < turns.last_turn.size(); ++i) {
    const auto d = static_cast<size_t>(samples[i].domain);
    if (by_domain.size() <= d) by_domain.resize(d + 1);
    by_domain[d].push_back(turns.last_turn[i]);
  }
  for (size_t d = 1; d < by_domain.size(); ++d) {
    if (by_domain[0].empty() || by_domain[d].empty()) continue;
    const auto rho = spearman(mean_over(by_domain[0]), mean_over(by_domain[d]));
    fmt::print("head ordering across kinds of text (kind 1 vs kind {}): Spearman {}\n", d + 1,
               rho ? fmt::format("{:.3f}", *rho) : std::string("undefined"));
  }
}

}  // namespace

int cmd_profile(const ProfileOptions& opt) {
  ModelOptions mo;
  mo.max_batch = 512;
  auto model = Model::load(opt.model, mo);
  if (!model) return fail(model.message());
  auto tok = Tokenizer::from_gguf((*model)->gguf());
  if (!tok) return fail(tok.message());
  if (opt.turns < 1) return fail("--turns must be at least 1");
  auto samples = pilot_samples(opt, **tok, (*model)->config().vocab);
  if (!samples) return fail(samples.message());
  auto level = parse_budget_level(opt.level);
  if (!level) return fail(level.message());

  ThreadPool pool(opt.threads);
  auto sched = Scheduler::create(**model, **tok, pool, profiling_scheduler_options(opt, (*model)->config(), *level));
  if (!sched) return fail(sched.message());
  RetentionProfile prof = empty_profile(opt, **model, *level);
  TurnRetention turns;
  if (Status st = measure_samples(**sched, *samples, opt, prof, turns); !st) return fail(st.message());
  prof.n_samples = static_cast<int>(turns.last_turn.size());
  if (prof.n_samples < 2) return fail("profiling needs at least 2 samples; give more text or --samples files");
  set_head_statistics(prof, turns.last_turn);
  if (Status st = save_profile(prof, opt.out); !st) return fail(st.message());
  print_stability(prof, opt, turns, *samples);
  return 0;
}

Command register_profile(CLI::App& app) {
  auto opt = std::make_shared<ProfileOptions>();
  ProfileOptions& prof = *opt;
  auto* c_prof = app.add_subcommand(
      "profile", "Measure per-head KV retention on pilot samples and write a profile (for --kv-policy tangram)");
  c_prof->add_option("-m,--model", prof.model, "GGUF model")->required()->check(CLI::ExistingFile);
  c_prof->add_option("--samples", prof.samples,
                     "Pilot text: a file of JSON lines {\"text\": ...} or plain text split at lines '---' "
                     "(long text is cut into --sample-tokens pieces); repeat for each kind of text. "
                     "Default: generated token sequences of two kinds")
      ->check(CLI::ExistingFile);
  c_prof->add_option("--kv-scorer", prof.scorer, "Scorer: keydiff, kvzip, snapkv, tova, expected_attention, streamingllm")
      ->capture_default_str();
  c_prof->add_option("--kv-ratio", prof.ratio, "Retention ratio profiled")->capture_default_str()->check(CLI::Range(0.01, 1.0));
  c_prof->add_option("--kv-level", prof.level, "Budget spread: per-layer or cross-layer")->capture_default_str()
      ->check(CLI::IsMember({"per-layer", "cross-layer"}));
  c_prof->add_option("-n,--n-samples", prof.n_samples, "Most samples used")->capture_default_str()
      ->check(CLI::Range(2, 100000));
  c_prof->add_option("--sample-tokens", prof.sample_tokens, "Longest sample in tokens")->capture_default_str()
      ->check(CLI::Range(16, 1 << 20));
  c_prof->add_option("--turns", prof.turns, "Turns per sample (growing prefixes), compressed every turn")
      ->capture_default_str()->check(CLI::Range(1, 16));
  c_prof->add_option("--kv-sink", prof.sink, "First tokens always kept")->capture_default_str()->check(CLI::NonNegativeNumber);
  c_prof->add_option("--kv-window", prof.window, "Recent tokens always kept")->capture_default_str()->check(CLI::NonNegativeNumber);
  c_prof->add_option("-t,--threads", prof.threads, "Threads (default: all cores)")->check(CLI::NonNegativeNumber);
  c_prof->add_option("-o,--out", prof.out, "Profile JSON to write")->capture_default_str();
  return {c_prof, [opt] { return cmd_profile(*opt); }, [opt] { return plan_json(*opt); }};
}

}  // namespace tangram::cli
