// The admission rules on fresh caches of a generated model: full KV reserves the first chunk,
// the other compressing policies the whole prompt, tangram up to its first compression point;
// tangram's committed footprint lies between its first interval and the uncompressed whole, and
// a request is admitted only beside what the running ones are committed to.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "compress/admission.h"
#include "compress/budgets.h"
#include "compress/compressor.h"
#include "compress/profile.h"
#include "compress_test_util.h"
#include "model/model.h"
#include "support/test_support.h"
#include "synth/synth.h"

namespace tangram {
namespace {

constexpr int kPageTokens = 16;

// A tangram profile keeping `fraction` of every head.
std::string uniform_profile(float fraction, const ModelConfig& c) {
  const size_t heads = static_cast<size_t>(c.n_layers) * static_cast<size_t>(c.n_kv_head);
  return testing::write_test_profile(std::vector<float>(heads, fraction), c.n_layers, c.n_kv_head,
                                     "admission-profile.json");
}

struct RuleSetup {
  std::unique_ptr<Compressor> compressor;
  std::unique_ptr<BlockPool> pool;
  std::unique_ptr<PagedKvCache> cache;
  std::unique_ptr<AdmissionRule> rule;
};

RuleSetup setup(const CompressionOptions& o) {
  Model& m = testing::small_compress_model();
  RuleSetup s;
  auto c = Compressor::create(o, m.config(), m.rope(), 1);
  EXPECT_TRUE(c.ok()) << c.message();
  s.compressor = std::move(c).value();
  const ModelConfig& cfg = m.config();
  auto pool = BlockPool::create(
      PageGeometry{kPageTokens, 1, cfg.head_dim, cfg.head_dim_v, KvType::F32}, 8u << 20, false);
  EXPECT_TRUE(pool.ok()) << pool.message();
  s.pool = std::move(pool).value();
  auto cache = PagedKvCache::create(m.kv_shape(), 1024, *s.pool, s.compressor->group_map());
  EXPECT_TRUE(cache.ok()) << cache.message();
  s.cache = std::move(cache).value();
  s.rule = AdmissionRule::for_policy(*s.compressor, kPageTokens);
  return s;
}

// Pages of every (single-head) group holding n entries.
int64_t pages_of(int64_t n) {
  const ModelConfig& c = testing::small_compress_model().config();
  return int64_t{c.n_layers} * c.n_kv_head * ((n + kPageTokens - 1) / kPageTokens);
}

TEST(AdmissionRule, FullKvReservesTheFirstChunkAndAWatermarkBesideOthers) {
  RuleSetup s = setup(CompressionOptions{});
  const AdmissionView v{s.cache.get(), /*end=*/300, 0, /*next_point=*/-1, /*max_new=*/20};
  EXPECT_EQ(s.rule->target(v, 40), 40);
  EXPECT_EQ(s.rule->committed_pages(v), -1);
  EXPECT_EQ(s.rule->pages_to_admit(v, 40, {}, /*watermark=*/8, 1000), pages_of(40));
  const std::vector<AdmissionView> running{v};
  EXPECT_EQ(s.rule->pages_to_admit(v, 40, running, 8, 1000), pages_of(40) + 8);
}

TEST(AdmissionRule, OtherCompressingPoliciesReserveTheWholePrompt) {
  CompressionOptions o;
  o.policy = KvPolicy::Uniform;
  o.ratio = 0.5;
  RuleSetup s = setup(o);
  const AdmissionView v{s.cache.get(), 300, 0, 300, 20};
  EXPECT_EQ(s.rule->target(v, 40), 300);
  EXPECT_EQ(s.rule->committed_pages(v), -1);
  EXPECT_EQ(s.rule->pages_to_admit(v, 40, {}, 8, 1000), pages_of(300));
}

TEST(AdmissionRule, TangramCommitsItsWholeFootprintBesideTheRunning) {
  const ModelConfig& c = testing::small_compress_model().config();
  CompressionOptions o;
  o.policy = KvPolicy::Tangram;
  o.ratio = 0.3;
  o.sink = 4;
  o.window = 16;
  o.chunk = 200;
  o.level = BudgetLevel::PerLayer;
  o.profile = uniform_profile(0.2f, c);
  RuleSetup s = setup(o);
  const AdmissionView v{s.cache.get(), /*end=*/500, 0, /*next_point=*/200, /*max_new=*/20};
  EXPECT_EQ(s.rule->target(v, 40), 200) << "up to the first compression point";
  const int64_t commit = s.rule->committed_pages(v);
  EXPECT_GE(commit, pages_of(200)) << "at least the first interval, uncompressed";
  EXPECT_LT(commit, pages_of(500 + 20)) << "less than the whole request uncompressed";
  // Alone: its footprint; beside a running request of the same shape: both footprints.
  EXPECT_EQ(s.rule->pages_to_admit(v, 40, {}, 8, 100000), commit);
  const std::vector<AdmissionView> running{v};
  EXPECT_EQ(s.rule->pages_to_admit(v, 40, running, 8, 100000), 2 * commit);
  // A footprint larger than the pool falls back to the first reservation.
  EXPECT_EQ(s.rule->pages_to_admit(v, 40, running, 8, commit - 1), pages_of(200));
}

}  // namespace
}  // namespace tangram
