// KV compression inside the scheduler: multi-turn conversations under every policy keep resident
// caches of the predicted size after every turn; long prompts are compressed chunk by chunk;
// query-aware and reconstruction scorers get their queries; the tangram policy admits against
// its closed-form footprint and so packs more requests than a policy that must reserve the
// uncompressed prompt.
#include <gtest/gtest.h>

#include "compress/budgets.h"
#include "compress/profile.h"
#include "scheduler_test_util.h"

namespace tangram::testing {
namespace {

std::string test_profile(const ModelConfig& c, const std::string& name) {
  RetentionProfile p;
  p.scorer = "keydiff";
  p.model = "tiny-qwen3";
  p.level = "per-layer";
  p.n_layers = c.n_layers;
  p.n_kv_head = c.n_kv_head;
  p.n_samples = 1;
  p.n_physical_layers = c.n_layers;
  for (int l = 0; l < c.n_layers; ++l) p.layer_ids.push_back(l);
  p.base_ratio = 0.3;
  // Four budget levels, permuted so that the global clustering pairs heads of different layers.
  for (int i = 0; i < c.n_layers * c.n_kv_head; ++i)
    p.median.push_back(0.05f + 0.1f * static_cast<float>((i * 3) % 4));
  p.mean = p.p90 = p.median;
  p.std_dev.assign(p.median.size(), 0.01f);
  for (float f : p.median) p.raw_ratio.push_back(f);
  p.sample_meta = {496, 4, 500, 16};
  p.sink = 4;
  p.window = 16;
  const std::string path = (temp_dir() / name).string();
  const Status st = save_profile(p, path);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

SchedulerOptions compressing(const TestModel& tm, KvPolicy policy, const char* scorer) {
  SchedulerOptions o;
  o.kv_memory = 32u << 20;
  o.kv_type = KvType::F32;
  o.prefault = false;
  o.page_tokens = 8;
  o.compression.policy = policy;
  o.compression.ratio = 0.4;
  o.compression.sink = 4;
  o.compression.window = 16;
  o.compression.chunk = 256;
  o.compression.scorer.name = scorer;
  if (policy == KvPolicy::Tangram) {
    o.page_group_size = 2;
    o.compression.profile = test_profile(tm.model->config(), "sched-profile.json");
  }
  return o;
}

// Pages a cache should hold: every group sized for its longest head.
int64_t pages_for_lengths(const PagedKvCache& cache, int page_tokens) {
  const HeadGroupMap& map = cache.head_groups();
  int64_t pages = 0;
  for (int g = 0; g < map.total_groups(); ++g) {
    int64_t longest = 0;
    for (const int f : map.members(g))
      longest = std::max(longest, cache.length(map.layer_of_head(f), map.kv_head_of(f)));
    pages += (longest + page_tokens - 1) / page_tokens;
  }
  return pages;
}

struct TurnCase {
  KvPolicy policy;
  const char* scorer;
  bool per_layer_groups = false;  // tangram: --kv-group-scope per-layer (default global)
  KvType kv_type = KvType::F32;   // Q8_0: scorers read quantized rows, pages are smaller
};
class MultiTurn : public ::testing::TestWithParam<TurnCase> {};

TEST_P(MultiTurn, FiveTurnsKeepResidentCachesOfThePredictedSize) {
  const TurnCase tc = GetParam();
  TestModel tm = synth_model("tiny-qwen3");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  ThreadPool pool(2);
  SchedulerOptions o = compressing(tm, tc.policy, tc.scorer);
  o.compression.per_layer_groups = tc.per_layer_groups;
  o.kv_type = tc.kv_type;
  auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, o);
  ASSERT_TRUE(s.ok()) << s.message();
  if (tc.policy == KvPolicy::Tangram) {
    // The global clustering of this profile pairs heads of different layers (2 layers x 2 KV
    // heads).
    EXPECT_EQ((*s)->compressor().group_map()->per_layer(), tc.per_layer_groups);
  }
  const int64_t V = tm.model->config().vocab;
  std::vector<int32_t> convo;
  for (int turn = 0; turn < 5; ++turn) {
    const auto user = prompt_of(turn == 0 ? 120 : 40, static_cast<uint32_t>(50 + turn), V);
    convo.insert(convo.end(), user.begin(), user.end());
    Request r = greedy_request(convo, 1);
    r.session_id = "conversation";
    RequestResult res;
    r.on_finish = [&res](const RequestResult& x) { res = x; };
    ASSERT_TRUE((*s)->submit(std::move(r)).ok());
    (*s)->run_until_idle();
    ASSERT_EQ(res.finish, FinishReason::Length) << res.error;
    EXPECT_EQ(res.compression.compressions, 1) << "turn " << turn;
    if (turn > 0) {
      EXPECT_GT(res.usage.cached_tokens, 0);
    }
    const Session* ses = (*s)->sessions().find("conversation");
    ASSERT_TRUE(ses && ses->cache);
    const PagedKvCache& cache = *ses->cache;
    const auto total = static_cast<int64_t>(convo.size());
    EXPECT_EQ(cache.n_positions(), total);
    EXPECT_EQ(cache.pages_held(), pages_for_lengths(cache, o.page_tokens)) << "turn " << turn;
    const int64_t predicted = (*s)->compressor().predicted_pages(total, o.page_tokens);
    if (predicted >= 0) {
      EXPECT_EQ(cache.pages_held(), predicted) << "turn " << turn;
    }
    const auto target = (*s)->compressor().target_lengths(total);
    int64_t kept = 0;
    for (int l = 0; l < cache.shape().n_layers; ++l)
      for (int h = 0; h < cache.shape().n_kv_head; ++h) {
        const int64_t len = cache.length(l, h);
        kept += len;
        if (!target.empty()) {
          EXPECT_EQ(len, target[static_cast<size_t>(l * cache.shape().n_kv_head + h)]);
        }
      }
    // Dynamic spreads the uniform total.
    if (tc.policy == KvPolicy::Dynamic) {
      EXPECT_EQ(kept, uniform_length(o.compression.ratio, total, 4, 16) * cache.shape().n_layers *
                          cache.shape().n_kv_head);
    }
    EXPECT_LT(kept, total * cache.shape().n_layers * cache.shape().n_kv_head);
    convo.insert(convo.end(), res.tokens.begin(), res.tokens.end());
  }
  EXPECT_TRUE((*s)->pool().check_consistency().ok());
  const SchedulerStats st = (*s)->stats();
  EXPECT_EQ(st.compressions, 5);
  EXPECT_GT(st.pages_freed, 0);
  EXPECT_EQ(st.pool.used_pages, (*s)->sessions().find("conversation")->cache->pages_held());
}

INSTANTIATE_TEST_SUITE_P(
    Policies, MultiTurn,
    ::testing::Values(TurnCase{KvPolicy::Uniform, "keydiff"},
                      TurnCase{KvPolicy::Dynamic, "keydiff"}, TurnCase{KvPolicy::Dynamic, "snapkv"},
                      TurnCase{KvPolicy::Tangram, "keydiff"},
                      TurnCase{KvPolicy::Tangram, "expected_attention"},
                      TurnCase{KvPolicy::Tangram, "kvzip"},
                      TurnCase{KvPolicy::Tangram, "keydiff", true},
                      TurnCase{KvPolicy::Uniform, "keydiff", false, KvType::Q8_0},
                      TurnCase{KvPolicy::Dynamic, "snapkv", false, KvType::Q8_0},
                      TurnCase{KvPolicy::Tangram, "keydiff", false, KvType::Q8_0},
                      TurnCase{KvPolicy::Tangram, "expected_attention", false, KvType::Q8_0},
                      TurnCase{KvPolicy::Tangram, "kvzip", false, KvType::Q8_0}),
    [](const auto& tinfo) {
      return std::string(kv_policy_name(tinfo.param.policy)) + "_" + tinfo.param.scorer +
             (tinfo.param.per_layer_groups ? "_per_layer" : "") +
             (tinfo.param.kv_type == KvType::Q8_0 ? "_q8_0" : "");
    });

TEST(Compression, LongPromptsAreCompressedChunkByChunkAndFirstTurnOnlyStopsAfterTurnOne) {
  TestModel tm = synth_model("tiny-qwen3");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  ThreadPool pool(2);
  SchedulerOptions o = compressing(tm, KvPolicy::Tangram, "keydiff");
  o.compression.first_turn_only = true;
  auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, o);
  ASSERT_TRUE(s.ok()) << s.message();
  auto p = prompt_of(300, 1, tm.model->config().vocab);  // points at 256 and 300
  Request r = greedy_request(p, 2);
  r.session_id = "long";
  RequestResult res;
  r.on_finish = [&res](const RequestResult& x) { res = x; };
  ASSERT_TRUE((*s)->submit(std::move(r)).ok());
  (*s)->run_until_idle();
  EXPECT_EQ(res.compression.compressions, 2);
  p.insert(p.end(), res.tokens.begin(), res.tokens.end());
  p.push_back(7);
  Request r2 = greedy_request(p, 2);
  r2.session_id = "long";
  r2.on_finish = [&res](const RequestResult& x) { res = x; };
  ASSERT_TRUE((*s)->submit(std::move(r2)).ok());
  (*s)->run_until_idle();
  EXPECT_EQ(res.compression.compressions, 0);  // only the first turn is compressed
  EXPECT_GT(res.usage.cached_tokens, 0);
}

// Admission: the tangram policy reserves its closed-form peak (up to its first compression
// point); dynamic compression cannot know its footprint and reserves the uncompressed prompt.
TEST(Compression, TangramAdmitsAgainstItsFootprintAndPacksMore) {
  TestModel tm = synth_model("tiny-qwen3");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  const ModelConfig& c = tm.model->config();
  ThreadPool pool(2);
  std::map<KvPolicy, int> admitted;
  for (KvPolicy policy : {KvPolicy::Dynamic, KvPolicy::Tangram}) {
    SchedulerOptions o = compressing(tm, policy, "keydiff");
    o.page_group_size = 2;
    o.compression.chunk = 128;
    // A step budget wide enough for every request to prefill at once: memory decides.
    o.step_tokens = 256;
    o.prefill_chunk = 32;
    // Room for about 2.5 uncompressed 480-token prompts.
    const size_t page_bytes = 8 * static_cast<size_t>(c.head_dim + c.head_dim_v) * 4 * 2;
    const int64_t groups = c.n_layers * (c.n_kv_head / 2);
    o.kv_memory = page_bytes * static_cast<size_t>(groups * (480 / 8) * 5 / 2);
    auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, o);
    ASSERT_TRUE(s.ok()) << s.message();
    int done = 0;
    for (int i = 0; i < 6; ++i) {
      Request r = greedy_request(prompt_of(480, static_cast<uint32_t>(i), c.vocab), 2);
      r.on_finish = [&done](const RequestResult& x) {
        done += x.finish == FinishReason::Length ? 1 : 0;
      };
      ASSERT_TRUE((*s)->submit(std::move(r)).ok());
    }
    int most = 0;
    while (!(*s)->idle()) {
      (*s)->step();
      most = std::max(most, (*s)->stats().running);
    }
    admitted[policy] = most;
    EXPECT_EQ(done, 6) << kv_policy_name(policy);
    EXPECT_TRUE((*s)->pool().check_consistency().ok());
  }
  std::printf("most running: dynamic %d, tangram %d\n", admitted[KvPolicy::Dynamic],
              admitted[KvPolicy::Tangram]);
  EXPECT_GT(admitted[KvPolicy::Tangram], admitted[KvPolicy::Dynamic]);
}

}  // namespace
}  // namespace tangram::testing
