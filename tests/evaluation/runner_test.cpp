// The workload runner on a generated model: every turn of every conversation runs once, later
// turns reuse the session's resident KV, records are consistent, closed and open loop.
#include <gtest/gtest.h>

#include <map>

#include "evaluation/runner.h"
#include "support/test_support.h"
#include "synth/synth.h"

namespace tangram {
namespace {

struct Loaded {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
};

Loaded tiny_model() {
  Loaded l;
  auto spec = synth_preset("tiny-qwen3");
  spec->ctx = 1024;
  const std::string path = (testing::temp_dir() / "runner.gguf").string();
  EXPECT_TRUE(write_synth_model(*spec, path, 1).ok());
  auto m = Model::load(path);
  EXPECT_TRUE(m.ok()) << m.message();
  l.model = std::move(m).value();
  auto t = Tokenizer::from_gguf(l.model->gguf());
  EXPECT_TRUE(t.ok());
  l.tok = std::move(t).value();
  return l;
}

WorkloadSpec small_spec(bool open_loop) {
  WorkloadSpec s;
  s.preset = "test";
  s.sessions = 4;
  s.turns = 3;
  s.first_turn_tokens = 60;
  s.followup_tokens = 12;
  s.output_tokens = 5;
  s.concurrency = 2;
  s.vocab = 500;
  s.seed = 3;
  if (open_loop) {
    s.arrival = WorkloadSpec::Arrival::OpenLoop;
    s.request_rate = 200.0;  // arrivals within a few milliseconds
  }
  return s;
}

class Runner : public ::testing::TestWithParam<bool> {};

TEST_P(Runner, EveryTurnRunsOnceAndLaterTurnsReuseTheSession) {
  Loaded l = tiny_model();
  ASSERT_TRUE(l.model && l.tok);
  const WorkloadSpec spec = small_spec(GetParam());
  auto convs = generate_workload(spec);
  ASSERT_TRUE(convs.ok()) << convs.message();
  SchedulerOptions o;
  o.kv_memory = 16u << 20;
  o.prefault = false;
  ThreadPool pool(2);
  auto run = run_workload(*l.model, *l.tok, pool, o, *convs, spec);
  ASSERT_TRUE(run.ok()) << run.message();
  ASSERT_EQ(run->records.size(), 12u);
  std::map<std::pair<std::string, int>, int> seen;
  for (const RequestRecord& r : run->records) {
    ++seen[{r.session, r.turn}];
    EXPECT_FALSE(r.error);
    EXPECT_EQ(r.output_tokens, 5);
    EXPECT_LE(r.submit_s, r.first_token_s);
    EXPECT_LE(r.first_token_s, r.finish_s);
    if (r.turn > 0) {
      EXPECT_GT(r.cached_tokens, 0) << r.session << " turn " << r.turn;
    }
  }
  EXPECT_EQ(seen.size(), 12u);
  auto m = compute_run_metrics(run->records, run->wall_s);
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->output_tokens, 60);
  EXPECT_GT(m->output_tokens_per_s, 0.0);
  EXPECT_FALSE(run->kv_used_bytes.t.empty());
  EXPECT_GE(run->peak_running, 1);
  if (!GetParam()) {
    EXPECT_LE(run->peak_running, 2);  // closed loop at concurrency 2
  }
  EXPECT_EQ(run->stats.pool.used_pages, 0);  // finished conversations leave nothing behind
}

INSTANTIATE_TEST_SUITE_P(Loops, Runner, ::testing::Values(false, true),
                         [](const auto& tinfo) { return tinfo.param ? "OpenLoop" : "ClosedLoop"; });

}  // namespace
}  // namespace tangram
