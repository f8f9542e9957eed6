// `tangram bench-model`: prefill and decode speed of the forward pass on a realistic
// generated model (or a given file), in several weight types, against the machine's measured
// memory bandwidth (the decode ceiling: every weight byte is read once per token) and beside
// llama.cpp on the same file when the oracle is installed. With --context, the --concurrency runs
// are KV-bound decode over synthetic KV under every policy (kv_bound.h).
#include "benchmark/model_bench.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "benchmark/batch_decode.h"
#include "benchmark/decode_cost.h"
#include "benchmark/kv_bound.h"
#include "benchmark/report.h"
#include "common/json_parse.h"
#include "common/progress.h"
#include "common/units.h"
#include "compress/kv_policy.h"
#include "compress/profile.h"
#include "evaluation/workload.h"
#include "gguf/gguf_file.h"
#include "kernels/cpu_features.h"
#include "kernels/memory_bandwidth.h"
#include "kv/kv_row.h"
#include "launch/data_dir.h"
#include "launch/engine_settings.h"
#include "launch/model_loading.h"
#include "model/model.h"
#include "synth/synth.h"

namespace tangram::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct ModelFigures {
  std::string label;
  std::string path;
  double weight_bytes_per_token = 0;  // matrix bytes streamed by one decode step
  double matmul_flops_per_token = 0;  // 2 * matrix parameters (attention excluded)
  double prefill_tok_s = 0;
  double decode_tok_s = 0;
  double llama_prefill_tok_s = 0;  // 0: not measured
  double llama_decode_tok_s = 0;
  std::string llama_note;
};

void count_weights(const Model& m, ModelFigures& f) {
  const DecodeCost c = decode_cost(m);
  f.weight_bytes_per_token = c.weight_bytes;
  f.matmul_flops_per_token = c.matmul_flops;
}

Status measure(Model& model, const BenchModelOptions& opt, ThreadPool& pool, ModelFigures& f) {
  count_weights(model, f);
  const auto& cfg = model.config();
  const std::vector<int32_t> prompt =
      random_tokens(opt.prompt_tokens, cfg.vocab, 42);        // [prompt_tokens]
  std::vector<float> logits(static_cast<size_t>(cfg.vocab));  // [vocab]
  const int64_t ctx = opt.prompt_tokens + opt.gen_tokens + 1;
  double best_prefill = 1e30, best_decode = 1e30;
  for (int rep = 0; rep < reps_of(opt); ++rep) {
    auto cache = model.new_cache(ctx, KvType::F32);
    TG_TRY(cache->reserve(ctx));
    auto t0 = Clock::now();
    TG_TRY(model.forward(*cache, prompt.data(), static_cast<int64_t>(prompt.size()), 0,
                         logits.data(), pool));
    best_prefill = std::min(best_prefill, since(t0));
    int32_t tok =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    t0 = Clock::now();
    for (int i = 0; i < opt.gen_tokens; ++i) {
      TG_TRY(model.forward(*cache, &tok, 1, cache->n_positions(), logits.data(), pool));
      tok = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    best_decode = std::min(best_decode, since(t0));
  }
  f.prefill_tok_s = opt.prompt_tokens / best_prefill;
  f.decode_tok_s = opt.gen_tokens / best_decode;
  return {};
}

// llama.cpp through tools/oracle (node-llama-cpp), on the same file and thread count.
void measure_llama_cpp(const BenchModelOptions& opt, int threads, ModelFigures& f) {
  const fs::path dir = oracle_dir();
  if (!fs::exists(dir / "node_modules" / "node-llama-cpp")) {
    f.llama_note = fmt::format(
        "llama.cpp oracle not installed in {} (scripts/oracle-setup.sh, or npm install "
        "--ignore-scripts there)",
        dir.string());
    return;
  }
  const fs::path out =
      fs::temp_directory_path() / fmt::format("tangram-llama-bench-{}.json", ::getpid());
  const std::string cmd = fmt::format(
      "node '{}' bench --model '{}' --prompt-tokens {} --gen-tokens {} --threads {} > '{}' "
      "2>/dev/null",
      (dir / "oracle.mjs").string(), f.path, opt.prompt_tokens, opt.gen_tokens, threads,
      out.string());
  const int rc = std::system(cmd.c_str());
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = parse_json_or_discarded(text.str());
  fs::remove(out);
  if (rc != 0 || j.is_discarded() || !j.contains("decode_tok_s")) {
    f.llama_note = "llama.cpp could not run this file";
    return;
  }
  f.llama_prefill_tok_s = j.value("prefill_tok_s", 0.0);
  f.llama_decode_tok_s = j.value("decode_tok_s", 0.0);
}

// The files to measure: -m, or the generated model of each --types.
Result<std::vector<std::pair<std::string, std::string>>> model_files(const BenchModelOptions& opt) {
  std::vector<std::pair<std::string, std::string>> files;  // (label, path)
  if (!opt.model.empty()) {
    files.emplace_back(fs::path(opt.model).filename().string(), opt.model);
    return files;
  }
  for (const auto& type : opt.types) {
    TG_ASSIGN(std::string path,
              cached_synth_model(opt.preset, type, opt.quick ? 8 : 0, opt.cache_dir, opt.threads));
    files.emplace_back(fmt::format("{} {}", opt.preset, type), path);
  }
  return files;
}

ModelOptions model_options(const BenchModelOptions& opt, const std::string& path) {
  ModelOptions mo;
  mo.weights = weights_memory(opt.mmap);
  mo.load_progress = weights_load_progress(path);
  return mo;
}

// Prefill and single-sequence decode (and llama.cpp's on the same file), then decode at each
// --concurrency through the engine.
Status measure_file(const BenchModelOptions& opt, ThreadPool& pool, double peak_gbps,
                    ModelFigures& f, std::vector<BatchDecode>& batches) {
  {
    TG_ASSIGN(std::unique_ptr<Model> model, Model::load(f.path, model_options(opt, f.path)));
    TG_TRY(measure(*model, opt, pool, f));
  }  // the weights are freed before llama.cpp maps the same file
  if (opt.llama_cpp) measure_llama_cpp(opt, pool.size(), f);
  if (opt.concurrency.empty() || opt.context > 0) return Status::Ok();
  BatchDecodeOptions bo;
  bo.concurrency = opt.concurrency;
  bo.prompt_tokens = opt.prompt_tokens;
  bo.gen_tokens = opt.gen_tokens;
  bo.threads = opt.threads;
  bo.peak_gbps = peak_gbps;
  const int c_max = *std::max_element(opt.concurrency.begin(), opt.concurrency.end());
  ModelOptions mo = model_options(opt, f.path);
  mo.max_batch = std::max<int64_t>(512, c_max);
  TG_ASSIGN(LoadedModel loaded,
            load_model_for_serving(f.path, "", "", 0, opt.cache_dir, opt.threads, mo));
  TG_ASSIGN(BatchDecode b, measure_batch_decode(*loaded.model, *loaded.tokenizer, f.label, bo));
  batches.push_back(std::move(b));
  return Status::Ok();
}

// The profile dynamic and tangram run with, cut to the model's layers and saved beside the
// report (or in a temp folder) for the Compressor to load; empty when neither policy runs.
Result<std::string> fit_profile(const BenchModelOptions& opt, const ModelConfig& cfg) {
  const bool needed =
      std::any_of(opt.policies.begin(), opt.policies.end(),
                  [](const std::string& p) { return p == "dynamic" || p == "tangram"; });
  if (!needed || opt.kv_ratio >= 1.0) return std::string();
  const std::string path =
      opt.profile.empty()
          ? (data_dir() / "profiles/keydiff/qwen3-4b-instruct-2507/profile_perlayer.json").string()
          : opt.profile;
  auto profile = load_profile(path);
  if (!profile)
    return make_error("{} (pass --profile; `tangram profile` makes one)", profile.message());
  TG_ASSIGN(RetentionProfile fitted, profile_first_layers(*profile, cfg.n_layers));
  if (fitted.n_layers != cfg.n_layers || fitted.n_kv_head != cfg.n_kv_head)
    return make_error(
        "the profile {} is for {} layers x {} KV heads, the model has {} x {}: pass --profile",
        path, profile->n_layers, profile->n_kv_head, cfg.n_layers, cfg.n_kv_head);
  const fs::path dir =
      opt.output.out_dir.empty() ? fs::temp_directory_path() : fs::path(opt.output.out_dir);
  const std::string out = (dir / fmt::format("kv-bound-profile-{}.json", ::getpid())).string();
  TG_TRY(save_profile(fitted, out));
  return out;
}

// KV-bound decode of one model file at every --concurrency and policy.
Status measure_kv_bound(const BenchModelOptions& opt, ThreadPool& pool, double peak_gbps,
                        const ModelFigures& f, ProgressBar& bar, std::vector<KvBoundDecode>& out) {
  TG_ASSIGN(std::unique_ptr<Model> model, Model::load(f.path, model_options(opt, f.path)));
  KvBoundOptions ko;
  ko.concurrency = opt.concurrency;
  ko.context = opt.context;
  ko.steps = opt.gen_tokens;
  ko.policies = opt.policies;
  ko.ratio = opt.kv_ratio;
  ko.page_tokens = opt.page_tokens;
  ko.rounds = rounds_of(opt);
  ko.on_run_timed = [&bar] { bar.add(); };
  ko.kv_types.clear();
  for (const std::string& t : opt.kv_types)
    ko.kv_types.push_back(*parse_kv_type(t));  // checked by the flags
  ko.peak_gbps = peak_gbps;
  TG_ASSIGN(ko.profile, fit_profile(opt, model->config()));
  auto d = measure_kv_bound_decode(*model, pool, f.label, ko);
  if (!ko.profile.empty() && opt.output.out_dir.empty()) fs::remove(ko.profile);
  if (!d) return d.error();
  out.push_back(std::move(d).value());
  return Status::Ok();
}

BenchReport model_report(const BenchModelOptions& opt, int threads, double peak_gbps,
                         const std::vector<ModelFigures>& figures,
                         const std::vector<BatchDecode>& batches, std::FILE* console) {
  BenchReport report;
  // Figures differ by core: the report names the CPU and the kernel level that produced them.
  const std::string machine = fmt::format("{}; {} kernels", cpu::describe(cpu::features()),
                                          cpu::level_name(cpu::active_level()));
  fmt::print(console,
             "\n{}\nprompt {} tokens, decode {} tokens, {} threads, best of {}; peak read "
             "bandwidth {:.1f} GB/s\n\n",
             machine, opt.prompt_tokens, opt.gen_tokens, threads, reps_of(opt), peak_gbps);
  fmt::print(console, "{:<26} {:>10} {:>11} {:>9} {:>10} {:>9} {:>7} | {:>11} {:>10}\n", "model",
             "weights", "prefill t/s", "GFLOP/s", "decode t/s", "GB/s", "of bw", "llama.cpp pf",
             "llama.cpp dc");
  std::string md =
      "| model | weights | prefill t/s | GFLOP/s | decode t/s | GB/s | of bw | llama.cpp prefill | "
      "llama.cpp decode |\n"
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  nlohmann::json& j = report.json;
  j["cpu"] = cpu::describe(cpu::features());
  j["kernel_level"] = cpu::level_name(cpu::active_level());
  j["bandwidth_gbps"] = peak_gbps;
  j["threads"] = threads;
  j["prompt_tokens"] = opt.prompt_tokens;
  j["gen_tokens"] = opt.gen_tokens;
  for (const auto& f : figures) {
    const double gbps = f.decode_tok_s * f.weight_bytes_per_token / 1e9;
    const double gflops = f.prefill_tok_s * f.matmul_flops_per_token / 1e9;
    const std::string lp =
        f.llama_decode_tok_s > 0 ? fmt::format("{:.1f}", f.llama_prefill_tok_s) : "-";
    const std::string ld =
        f.llama_decode_tok_s > 0 ? fmt::format("{:.2f}", f.llama_decode_tok_s) : "-";
    fmt::print(console,
               "{:<26} {:>10} {:>11.1f} {:>9.1f} {:>10.2f} {:>9.1f} {:>6.0f}% | {:>11} {:>10}\n",
               f.label, format_bytes(f.weight_bytes_per_token), f.prefill_tok_s, gflops,
               f.decode_tok_s, gbps, 100.0 * gbps / peak_gbps, lp, ld);
    if (!f.llama_note.empty()) fmt::print(console, "  ({})\n", f.llama_note);
    md += fmt::format("| {} | {} | {:.1f} | {:.1f} | {:.2f} | {:.1f} | {:.0f}% | {} | {} |\n",
                      f.label, format_bytes(f.weight_bytes_per_token), f.prefill_tok_s, gflops,
                      f.decode_tok_s, gbps, 100.0 * gbps / peak_gbps, lp, ld);
    j["models"].push_back({{"label", f.label},
                           {"path", f.path},
                           {"weight_bytes_per_token", f.weight_bytes_per_token},
                           {"prefill_tok_s", f.prefill_tok_s},
                           {"prefill_gflops", gflops},
                           {"decode_tok_s", f.decode_tok_s},
                           {"decode_gbps", gbps},
                           {"decode_fraction_of_bandwidth", gbps / peak_gbps},
                           {"llama_cpp_prefill_tok_s", f.llama_prefill_tok_s},
                           {"llama_cpp_decode_tok_s", f.llama_decode_tok_s}});
  }
  fmt::print(console,
             "\nGB/s = decode tok/s x weight bytes per token; 'of bw' is that over the measured "
             "read bandwidth.\n");
  for (const BatchDecode& b : batches) {
    print_batch_decode(b, console);
    j["batch_decode"].push_back(batch_decode_json(b));
  }
  if (!batches.empty())
    report.plots.emplace_back("decode_vs_concurrency.svg", batch_decode_plot(batches));
  report.markdown =
      fmt::format(
          "# tangram bench-model report\n\n{}.\n\nPrompt {} tokens, decode {} tokens, {} threads, "
          "best of {}; peak read bandwidth {:.1f} GB/s.\n\n",
          machine, opt.prompt_tokens, opt.gen_tokens, threads, reps_of(opt), peak_gbps) +
      md;
  return report;
}

}  // namespace

int reps_of(const BenchModelOptions& opt) { return opt.reps.value_or(opt.quick ? 1 : 2); }
int rounds_of(const BenchModelOptions& opt) { return opt.rounds.value_or(opt.quick ? 1 : 3); }

Status check_bench_model_flags(const BenchModelOptions& opt) {
  const BenchModelOptions defaults;
  if (opt.context <= 0 && (opt.policies != defaults.policies || opt.kv_ratio != defaults.kv_ratio ||
                           opt.profile != defaults.profile || opt.kv_types != defaults.kv_types ||
                           opt.page_tokens != defaults.page_tokens || opt.rounds.has_value()))
    return make_error(
        "--policies, --kv-ratio, --profile, --kv-type, --page-tokens and --rounds apply to "
        "KV-bound runs: "
        "give --context too");
  if (rounds_of(opt) < 1) return make_error("--rounds must be positive, not {}", rounds_of(opt));
  if (reps_of(opt) < 1) return make_error("--reps must be positive, not {}", reps_of(opt));
  if (opt.page_tokens < 1)
    return make_error("--page-tokens must be positive, not {}", opt.page_tokens);
  if (opt.context > 0 && opt.concurrency.empty())
    return make_error("--context needs --concurrency: the numbers of sequences decoded together");
  if (!(opt.kv_ratio > 0.0 && opt.kv_ratio <= 1.0))
    return make_error("--kv-ratio must be in (0, 1], not {}", opt.kv_ratio);
  if (opt.policies.empty()) return make_error("--policies is empty");
  for (const std::string& p : opt.policies)
    if (auto policy = parse_kv_policy(p); !policy) return policy.error();
  if (opt.kv_types.empty()) return make_error("--kv-type is empty");
  for (const std::string& t : opt.kv_types)
    if (!parse_kv_type(t)) return make_error("--kv-type must list f16, f32 or q8_0, not '{}'", t);
  return Status::Ok();
}

Status run_model_bench(BenchModelOptions opt) {
  TG_TRY(check_bench_model_flags(opt));
  if (opt.quick) {
    opt.prompt_tokens = std::min(opt.prompt_tokens, 64);
    opt.gen_tokens = std::min(opt.gen_tokens, 16);
  }
  for (int c : opt.concurrency)
    if (c < 1) return make_error("--concurrency values must be positive, not {}", c);
  TG_TRY(prepare_report_dir(opt.output));
  std::FILE* console = opt.output.console();
  ThreadPool pool(opt.threads);
  fmt::print(console, "measuring memory read bandwidth ({} threads)...\n", pool.size());
  const double peak_gbps = measure_read_bandwidth(pool).read_gbps;
  fmt::print(console, "memory read bandwidth: {:.1f} GB/s\n\n", peak_gbps);
  TG_ASSIGN(auto files, model_files(opt));
  std::vector<ModelFigures> figures;
  std::vector<BatchDecode> batches;
  std::vector<KvBoundDecode> kv_bound;
  {
    // A step per file's forward-pass figures, and one per KV-bound run of every round.
    const auto runs_per_round =
        static_cast<int64_t>(opt.kv_types.size() * opt.policies.size() * opt.concurrency.size());
    const int64_t kv_runs = opt.context > 0 ? int64_t{rounds_of(opt)} * runs_per_round : 0;
    ProgressBar bar("benchmarking", static_cast<int64_t>(files.size()) * (1 + kv_runs));
    for (const auto& [label, path] : files) {
      ModelFigures f;
      f.label = label;
      f.path = path;
      TG_TRY(measure_file(opt, pool, peak_gbps, f, batches));
      bar.add();
      if (opt.context > 0) TG_TRY(measure_kv_bound(opt, pool, peak_gbps, f, bar, kv_bound));
      figures.push_back(f);
    }
  }
  BenchReport report = model_report(opt, pool.size(), peak_gbps, figures, batches, console);
  for (const KvBoundDecode& d : kv_bound) {
    print_kv_bound(d, console);
    report.json["kv_bound_decode"].push_back(kv_bound_json(d));
    report.markdown += kv_bound_markdown(d);
  }
  return write_report(report, opt.output);
}

}  // namespace tangram::bench
