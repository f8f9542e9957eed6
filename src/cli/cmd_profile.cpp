// `tangram profile`: measures how much of the context each (layer, KV head) keeps when the
// chosen scorer spreads a run-time budget (the dynamic policy at --kv-ratio, per-layer or
// cross-layer) over pilot samples, and writes the per-head statistics as a profile in the
// shared JSON schema (compress/profile.h), which the tangram policy turns into deterministic
// budgets. Each head is its own page group while profiling, so kept lengths are exact
// (profiling/profiler.h). Without --samples the pilot text is the calibration text shipped with
// tangram.
//
// It also reports whether the static premise holds: per-head spread over samples, the rank
// correlation of head orderings between samples, between the first and the last turn of each
// sample (a sample is cut into --turns growing prefixes, each one a turn of one conversation
// whose cache is compressed every turn), and between the kinds of text (--samples repeated, one
// file per kind; the shipped calibration text has five).
#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "cli/cli_error.h"
#include "cli/command.h"
#include "cli/commands.h"
#include "cli/config_json.h"
#include "compress/profile.h"
#include "launch/data_dir.h"
#include "launch/model_loading.h"
#include "model/model.h"
#include "profiling/profiler.h"
#include "tokenizer/tokenizer.h"

namespace tangram::cli {
namespace {

std::vector<double> mean_over(const std::vector<std::vector<double>>& rows) {
  if (rows.empty()) return {};
  std::vector<double> m(rows[0].size(), 0.0);
  for (const auto& r : rows)
    for (size_t i = 0; i < m.size(); ++i) m[i] += r[i];
  for (auto& x : m) x /= static_cast<double>(rows.size());
  return m;
}

// Prints whether the static premise holds: spread of each head over samples, and how stable the
// ordering of heads is across samples, turns and kinds of text.
void print_stability(const RetentionProfile& prof, const ProfileOptions& opt,
                     const TurnRetention& turns, const std::vector<PilotSample>& samples) {
  const ProfileStability stab = profile_stability(prof);
  fmt::print(
      "\nprofile of {} ({} layers x {} KV heads), scorer {}, ratio {}, level {}, {} samples, "
      "sink {} window {}: written to {}\n",
      prof.model, prof.n_layers, prof.n_kv_head, opt.scorer, opt.ratio, prof.level, prof.n_samples,
      opt.sink, opt.window, opt.out);
  double lo = 1, hi = 0, avg = 0;
  for (float m : prof.mean) {
    lo = std::min<double>(lo, m);
    hi = std::max<double>(hi, m);
    avg += static_cast<double>(m);
  }
  avg /= static_cast<double>(prof.mean.size());
  fmt::print("per-head retention (mean over samples): min {:.3f}, mean {:.3f}, max {:.3f}\n", lo,
             avg, hi);
  fmt::print(
      "spread over samples: std mean {:.3f} max {:.3f}; p90 - median mean {:.3f} max {:.3f}; "
      "{:.0f}% of heads with std < 0.05\n",
      stab.mean_std, stab.max_std, stab.mean_p90_gap, stab.max_p90_gap,
      100.0 * stab.intrinsic_coverage);
  fmt::print(
      "head ordering across samples (Spearman vs the mean ordering): all heads mean {:.3f} min "
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
    const auto d = static_cast<size_t>(samples[i].kind);
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
  mo.weights = weights_memory(opt.mmap);
  mo.load_progress = weights_load_progress(opt.model);
  auto model = Model::load(opt.model, mo);
  if (!model) return fail(model.message());
  auto tok = Tokenizer::from_gguf((*model)->gguf());
  if (!tok) return fail(tok.message());
  std::vector<std::string> files = opt.samples;
  if (files.empty()) {
    auto shipped = calibration_files(calibration_folders());
    if (!shipped) return fail(shipped.message());
    for (const auto& f : *shipped) files.push_back(f.string());
  }
  auto samples = read_pilot_samples(files, **tok, opt.sample_tokens, opt.n_samples);
  if (!samples) return fail(samples.message());
  ProfilerSettings settings = opt;
  settings.model_name = opt.model;
  auto measured = measure_profile(**model, **tok, *samples, settings);
  if (!measured) return fail(measured.message());
  if (Status st = save_profile(measured->profile, opt.out); !st) return fail(st.message());
  print_stability(measured->profile, opt, measured->turns, *samples);
  return 0;
}

Command register_profile(CLI::App& app) {
  auto opt = std::make_shared<ProfileOptions>();
  ProfileOptions& prof = *opt;
  auto* c_prof = app.add_subcommand("profile",
                                    "Measure per-head KV retention on pilot samples and write a "
                                    "profile (for --kv-policy tangram)");
  c_prof->add_option("-m,--model", prof.model, "GGUF model")->required()->check(CLI::ExistingFile);
  add_mmap_flag(c_prof, prof.mmap);
  c_prof
      ->add_option(
          "--samples", prof.samples,
          "Pilot text: a file of JSON lines {\"text\": ...} or plain text split at lines '---' "
          "(long text is cut into --sample-tokens pieces); repeat for each kind of text. "
          "Default: the calibration text shipped with tangram (narrative, dialogue, technical, "
          "code, "
          "instructions)")
      ->check(CLI::ExistingFile);
  c_prof
      ->add_option("--kv-scorer", prof.scorer,
                   "Scorer: keydiff, kvzip, snapkv, tova, expected_attention, streamingllm")
      ->capture_default_str();
  c_prof->add_option("--kv-ratio", prof.ratio, "Retention ratio profiled")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1.0));
  c_prof->add_option("--kv-level", prof.level, "Budget spread: per-layer or cross-layer")
      ->capture_default_str()
      ->check(CLI::IsMember({"per-layer", "cross-layer"}));
  c_prof->add_option("-n,--n-samples", prof.n_samples, "Most samples used")
      ->capture_default_str()
      ->check(CLI::Range(2, 100000));
  c_prof->add_option("--sample-tokens", prof.sample_tokens, "Longest sample in tokens")
      ->capture_default_str()
      ->check(CLI::Range(16, 1 << 20));
  c_prof
      ->add_option("--turns", prof.turns,
                   "Turns per sample (growing prefixes), compressed every turn")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  c_prof->add_option("--kv-sink", prof.sink, "First tokens always kept")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c_prof->add_option("--kv-window", prof.window, "Recent tokens always kept")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c_prof->add_option("-t,--threads", prof.threads, "Threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  c_prof->add_option("-o,--out", prof.out, "Profile JSON to write")->capture_default_str();
  return {c_prof, [opt] { return cmd_profile(*opt); }, [opt] { return plan_json(*opt); }};
}

}  // namespace tangram::cli
