// `tangram bench-model`: prefill and decode speed of the forward pass on a realistic
// generated model (or a given file), in several weight types, against the machine's measured
// memory bandwidth (the decode ceiling: every weight byte is read once per token) and beside
// llama.cpp on the same file when the oracle is installed.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/bench_models.h"
#include "cli/commands.h"
#include "common/progress.h"
#include "common/units.h"
#include "gguf/gguf_file.h"
#include "kernels/memory_bandwidth.h"
#include "model/model.h"
#include "synth/synth.h"

#ifndef TANGRAM_SOURCE_DIR
#define TANGRAM_SOURCE_DIR "."
#endif

namespace tangram::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

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
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> pick(1, static_cast<int32_t>(std::min<int64_t>(cfg.vocab, 1000)) - 1);
  std::vector<int32_t> prompt(static_cast<size_t>(opt.prompt_tokens));  // [prompt_tokens]
  for (auto& t : prompt) t = pick(rng);
  std::vector<float> logits(static_cast<size_t>(cfg.vocab));  // [vocab]
  const int64_t ctx = opt.prompt_tokens + opt.gen_tokens + 1;
  double best_prefill = 1e30, best_decode = 1e30;
  for (int rep = 0; rep < opt.reps; ++rep) {
    auto cache = model.new_cache(ctx, KvType::F32);
    TG_TRY(cache->reserve(ctx));
    auto t0 = Clock::now();
    TG_TRY(model.forward(*cache, prompt.data(), static_cast<int64_t>(prompt.size()), 0, logits.data(), pool));
    best_prefill = std::min(best_prefill, since(t0));
    int32_t tok = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
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
  const char* env = std::getenv("TANGRAM_ORACLE_DIR");
  const fs::path dir = env && *env ? fs::path(env) : fs::path(TANGRAM_SOURCE_DIR) / "tools" / "oracle";
  if (!fs::exists(dir / "node_modules" / "node-llama-cpp")) {
    f.llama_note = "llama.cpp oracle not installed (run scripts/oracle-setup.sh)";
    return;
  }
  const fs::path out = fs::temp_directory_path() / fmt::format("tangram-llama-bench-{}.json", ::getpid());
  const std::string cmd = fmt::format(
      "node '{}' bench --model '{}' --prompt-tokens {} --gen-tokens {} --threads {} > '{}' 2>/dev/null",
      (dir / "oracle.mjs").string(), f.path, opt.prompt_tokens, opt.gen_tokens, threads, out.string());
  const int rc = std::system(cmd.c_str());
  std::ifstream in(out);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  fs::remove(out);
  if (rc != 0 || j.is_discarded() || !j.contains("decode_tok_s")) {
    f.llama_note = "llama.cpp could not run this file";
    return;
  }
  f.llama_prefill_tok_s = j.value("prefill_tok_s", 0.0);
  f.llama_decode_tok_s = j.value("decode_tok_s", 0.0);
}

}  // namespace

int cmd_bench_model(const BenchModelOptions& in_opt) {
  BenchModelOptions opt = in_opt;
  if (opt.quick) {
    opt.prompt_tokens = std::min(opt.prompt_tokens, 64);
    opt.gen_tokens = std::min(opt.gen_tokens, 16);
    opt.reps = 1;
  }
  ThreadPool pool(opt.threads);
  fmt::print("measuring memory read bandwidth ({} threads)...\n", pool.size());
  const BandwidthResult bw = measure_read_bandwidth(pool);
  fmt::print("memory read bandwidth: {:.1f} GB/s\n\n", bw.read_gbps);

  std::vector<ModelFigures> figures;
  std::vector<std::string> paths;
  std::vector<std::string> labels;
  if (!opt.model.empty()) {
    paths.push_back(opt.model);
    labels.push_back(fs::path(opt.model).filename().string());
  } else {
    for (const auto& type : opt.types) {
      auto p = cached_synth_model(opt.preset, type, opt.quick ? 8 : 0, opt.cache_dir, opt.threads);
      if (!p) return fmt::print(stderr, "error: {}\n", p.message()), 1;
      paths.push_back(*p);
      labels.push_back(fmt::format("{} {}", opt.preset, type));
    }
  }

  {
    ProgressBar bar("benchmarking", static_cast<int64_t>(paths.size()));
    for (size_t i = 0; i < paths.size(); ++i) {
      ModelFigures f;
      f.label = labels[i];
      f.path = paths[i];
      auto model = Model::load(paths[i], {});
      if (!model) return fmt::print(stderr, "error: {}\n", model.message()), 1;
      if (auto st = measure(**model, opt, pool, f); !st) return fmt::print(stderr, "error: {}\n", st.message()), 1;
      model->reset();  // free the mapping before llama.cpp maps the same file
      if (opt.llama_cpp) measure_llama_cpp(opt, pool.size(), f);
      figures.push_back(f);
      bar.add();
    }
  }

  fmt::print("\nprompt {} tokens, decode {} tokens, {} threads, best of {}; peak read bandwidth {:.1f} GB/s\n\n",
             opt.prompt_tokens, opt.gen_tokens, pool.size(), opt.reps, bw.read_gbps);
  fmt::print("{:<26} {:>10} {:>11} {:>9} {:>10} {:>9} {:>7} | {:>11} {:>10}\n", "model", "weights", "prefill t/s",
             "GFLOP/s", "decode t/s", "GB/s", "of bw", "llama.cpp pf", "llama.cpp dc");
  nlohmann::json j;
  j["bandwidth_gbps"] = bw.read_gbps;
  j["threads"] = pool.size();
  j["prompt_tokens"] = opt.prompt_tokens;
  j["gen_tokens"] = opt.gen_tokens;
  for (const auto& f : figures) {
    const double gbps = f.decode_tok_s * f.weight_bytes_per_token / 1e9;
    const double gflops = f.prefill_tok_s * f.matmul_flops_per_token / 1e9;
    const std::string lp = f.llama_decode_tok_s > 0 ? fmt::format("{:.1f}", f.llama_prefill_tok_s) : "-";
    const std::string ld = f.llama_decode_tok_s > 0 ? fmt::format("{:.2f}", f.llama_decode_tok_s) : "-";
    fmt::print("{:<26} {:>10} {:>11.1f} {:>9.1f} {:>10.2f} {:>9.1f} {:>6.0f}% | {:>11} {:>10}\n", f.label,
               format_bytes(f.weight_bytes_per_token), f.prefill_tok_s, gflops, f.decode_tok_s, gbps,
               100.0 * gbps / bw.read_gbps, lp, ld);
    if (!f.llama_note.empty()) fmt::print("  ({})\n", f.llama_note);
    j["models"].push_back({{"label", f.label}, {"path", f.path}, {"weight_bytes_per_token", f.weight_bytes_per_token},
                           {"prefill_tok_s", f.prefill_tok_s}, {"prefill_gflops", gflops},
                           {"decode_tok_s", f.decode_tok_s}, {"decode_gbps", gbps},
                           {"decode_fraction_of_bandwidth", gbps / bw.read_gbps},
                           {"llama_cpp_prefill_tok_s", f.llama_prefill_tok_s},
                           {"llama_cpp_decode_tok_s", f.llama_decode_tok_s}});
  }
  fmt::print("\nGB/s = decode tok/s x weight bytes per token; 'of bw' is that over the measured read bandwidth.\n");
  if (!opt.json_out.empty()) {
    std::ofstream out(opt.json_out);
    out << j.dump(2) << "\n";
    if (!out) return fmt::print(stderr, "error: cannot write {}\n", opt.json_out), 1;
    fmt::print("figures written to {}\n", opt.json_out);
  }
  return 0;
}

Command register_bench_model(CLI::App& app) {
  auto opt = std::make_shared<BenchModelOptions>();
  BenchModelOptions& bm = *opt;
  auto* c_bm = app.add_subcommand("bench-model",
                                  "Prefill and decode tok/s of the forward pass against the memory-bandwidth limit");
  c_bm->add_option("-m,--model", bm.model, "Benchmark this GGUF instead of generated models")->check(CLI::ExistingFile);
  c_bm->add_option("--preset", bm.preset, "Shape of the generated models")->capture_default_str();
  c_bm->add_option("--types", bm.types, "Weight types of the generated models")->capture_default_str()->delimiter(',');
  c_bm->add_option("--prompt-tokens", bm.prompt_tokens, "Prompt length for prefill")->capture_default_str()
      ->check(CLI::PositiveNumber);
  c_bm->add_option("--gen-tokens", bm.gen_tokens, "Tokens to decode")->capture_default_str()->check(CLI::PositiveNumber);
  c_bm->add_option("-t,--threads", bm.threads, "Threads (default: all cores)")->check(CLI::NonNegativeNumber);
  c_bm->add_option("--reps", bm.reps, "Repetitions; the best is reported")->capture_default_str()
      ->check(CLI::PositiveNumber);
  c_bm->add_option("--cache-dir", bm.cache_dir, "Where generated models are kept (default ~/.cache/tangram/models)");
  c_bm->add_flag("!--no-llama-cpp", bm.llama_cpp, "Skip the llama.cpp comparison");
  c_bm->add_option("--json", bm.json_out, "Also write the figures as JSON to this file");
  c_bm->add_flag("--quick", bm.quick, "8 layers, short prompt: a run of well under a minute");
  return {c_bm, [opt] { return cmd_bench_model(*opt); }, {}};
}

}  // namespace tangram::cli
