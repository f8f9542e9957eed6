// Model::forward_step (many sequences in one batch over paged caches) against separate
// single-sequence forwards over contiguous F32 caches, on the same tokens.
#include <gtest/gtest.h>

#include "kv/block_pool.h"
#include "kv/head_group_map.h"
#include "kv/paged_kv_cache.h"
#include "scheduler_test_util.h"

namespace tangram::testing {
namespace {

struct Geometry {
  int page_tokens;
  int group_size;
};

class ForwardStepTest : public ::testing::TestWithParam<Geometry> {};

TEST_P(ForwardStepTest, MixedPrefillAndDecodeMatchSeparateForwards) {
  TestModel tm = synth_model("tiny-qwen3");
  ASSERT_TRUE(tm.model);
  Model& model = *tm.model;
  const ModelConfig& c = model.config();
  ThreadPool pool(2);
  const Geometry g = GetParam();
  PageGeometry geo{g.page_tokens, std::min(g.group_size, c.n_kv_head), c.head_dim, c.head_dim_v,
                   KvType::F32};
  auto bp = BlockPool::create(geo, 8u << 20);
  ASSERT_TRUE(bp.ok()) << bp.message();
  auto map = HeadGroupMap::contiguous(c.n_layers, c.n_kv_head, geo.group_size);
  ASSERT_TRUE(map.ok());
  auto shared_map = std::make_shared<const HeadGroupMap>(*map);

  // Three sequences with histories of different lengths; then one step where sequence 0
  // decodes one token, 1 reads a 9-token prompt chunk, and 2 decodes.
  const std::vector<int64_t> history = {13, 0, 37};
  const std::vector<int64_t> step_len = {1, 9, 1};
  const int64_t V = c.vocab;
  std::vector<std::unique_ptr<PagedKvCache>> paged;
  std::vector<std::unique_ptr<KvCache>> ref;
  std::vector<std::vector<int32_t>> toks;
  for (size_t i = 0; i < history.size(); ++i) {
    toks.push_back(prompt_of(history[i] + step_len[i], static_cast<uint32_t>(7 + i), V));
    auto pc = PagedKvCache::create(model.kv_shape(), 512, **bp, shared_map);
    ASSERT_TRUE(pc.ok()) << pc.message();
    paged.push_back(std::move(pc).value());
    ref.push_back(model.new_cache(0, KvType::F32));
    if (history[i] > 0) {
      ASSERT_TRUE(model.forward(*paged[i], toks[i].data(), history[i], 0, nullptr, pool).ok());
      ASSERT_TRUE(model.forward(*ref[i], toks[i].data(), history[i], 0, nullptr, pool).ok());
    }
  }
  std::vector<std::vector<float>> got(3), want(3);
  std::vector<SequenceStep> steps;
  for (size_t i = 0; i < 3; ++i) {
    // Sequence 1 asks for every row's logits, the others for the last row's.
    const bool all = i == 1;
    got[i].resize(static_cast<size_t>((all ? step_len[i] : 1) * V));
    want[i].resize(got[i].size());
    steps.push_back(SequenceStep{paged[i].get(), toks[i].data() + history[i], step_len[i],
                                 history[i], got[i].data(), all});
    ASSERT_TRUE(model
                    .forward(*ref[i], toks[i].data() + history[i], step_len[i], history[i],
                             want[i].data(), pool, all)
                    .ok());
  }
  const Status st = model.forward_step(steps, pool);
  ASSERT_TRUE(st.ok()) << st.message();
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_LT(max_abs_diff(got[i], want[i]), 1e-4f) << "sequence " << i;
    EXPECT_EQ(paged[i]->n_positions(), history[i] + step_len[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Geometries, ForwardStepTest,
                         ::testing::Values(Geometry{16, 4}, Geometry{16, 1}, Geometry{8, 2},
                                           Geometry{1, 1}, Geometry{32, 64}),
                         [](const auto& tinfo) {
                           std::string name = "P";
                           name += std::to_string(tinfo.param.page_tokens);
                           name += "_G";
                           name += std::to_string(tinfo.param.group_size);
                           return name;
                         });

TEST(ForwardStep, RejectsBadSteps) {
  TestModel tm = synth_model("tiny-llama");
  ASSERT_TRUE(tm.model);
  Model& model = *tm.model;
  ThreadPool pool(1);
  auto a = model.new_cache(0, KvType::F32);
  std::vector<int32_t> t = {5, 6, 7};
  std::vector<float> logits(static_cast<size_t>(model.config().vocab));
  // The same cache twice.
  std::vector<SequenceStep> twice = {{a.get(), t.data(), 1, 0, nullptr, false},
                                     {a.get(), t.data() + 1, 1, 0, nullptr, false}};
  EXPECT_FALSE(model.forward_step(twice, pool).ok());
  // A position that does not continue the cache.
  std::vector<SequenceStep> gap = {{a.get(), t.data(), 1, 4, logits.data(), false}};
  EXPECT_FALSE(model.forward_step(gap, pool).ok());
  // Too many tokens for one batch.
  std::vector<int32_t> many(static_cast<size_t>(model.max_batch() + 1), 5);
  std::vector<SequenceStep> big = {
      {a.get(), many.data(), static_cast<int64_t>(many.size()), 0, nullptr, false}};
  EXPECT_FALSE(model.forward_step(big, pool).ok());
  EXPECT_EQ(a->n_positions(), 0);
  EXPECT_FALSE(model.forward_step({}, pool).ok());
}

}  // namespace
}  // namespace tangram::testing
