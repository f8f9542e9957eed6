// Synthetic KV contexts (evaluation/synthetic_kv.h): each policy's lengths as its compressor (or
// run-time spread) would leave them, and a fill that holds exactly the layout's footprint.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "compress/budgets.h"
#include "compress/compressor.h"
#include "compress/profile.h"
#include "evaluation/synthetic_kv.h"
#include "kv/block_pool.h"
#include "model/rope.h"
#include "support/test_support.h"
#include "synth/synth.h"

namespace tangram {
namespace {

constexpr int kLayers = 2, kKvHeads = 4;

ModelConfig small_config() {
  auto spec = synth_preset("tiny-qwen3");
  spec->n_layers = kLayers;
  spec->n_kv_head = kKvHeads;
  spec->n_head = 8;
  spec->ctx = 4096;
  return synth_config(*spec);
}

// Heads of clearly different retention, so the policies' lengths differ.
std::string write_profile() {
  RetentionProfile p;
  p.scorer = "keydiff";
  p.model = "test";
  p.level = "per-layer";
  p.n_layers = kLayers;
  p.n_kv_head = kKvHeads;
  p.n_samples = 1;
  p.n_physical_layers = kLayers;
  p.layer_ids = {0, 1};
  p.base_ratio = 0.3;
  p.sink = 4;
  p.window = 16;
  p.median = p.mean = p.p90 = {0.05f, 0.1f, 0.2f, 0.6f, 0.3f, 0.3f, 0.02f, 0.5f};
  p.std_dev.assign(p.mean.size(), 0.0f);
  p.raw_ratio.assign(p.mean.begin(), p.mean.end());
  p.sample_meta = {996, 4, 1000, 16};
  const std::string path = (testing::temp_dir() / "synthetic-kv-profile.json").string();
  EXPECT_TRUE(save_profile(p, path).ok());
  return path;
}

struct Fixture {
  ModelConfig config = small_config();
  Rope rope{config, {}};
  SyntheticKvOptions options;
  Fixture() {
    options.context = 3000;
    options.ratio = 0.25;
    options.profile = write_profile();
  }
  SyntheticKvLayout layout(KvPolicy p) {
    auto l = synthetic_kv_layout(p, config, rope, options);
    EXPECT_TRUE(l.ok()) << l.message();
    return std::move(l).value();
  }
};

TEST(SyntheticKv, FullAndUniformLengthsAreTheCompressorsOnUnifiedPages) {
  Fixture f;
  const SyntheticKvLayout full = f.layout(KvPolicy::Full);
  EXPECT_EQ(full.group_size, kKvHeads);
  for (const int64_t l : full.lengths) EXPECT_EQ(l, 3000);
  const SyntheticKvLayout uni = f.layout(KvPolicy::Uniform);
  EXPECT_EQ(uni.group_size, kKvHeads);
  const int64_t want = uniform_length(0.25, 3000, f.options.sink, f.options.window);
  EXPECT_LT(want, 3000);
  for (const int64_t l : uni.lengths) EXPECT_EQ(l, want);
  EXPECT_EQ(full.footprint_pages(16), kLayers * (3000 + 15) / 16);
}

TEST(SyntheticKv, DynamicSpreadsEachLayersUniformTotalByTheProfile) {
  Fixture f;
  const SyntheticKvLayout dyn = f.layout(KvPolicy::Dynamic);
  const SyntheticKvLayout uni = f.layout(KvPolicy::Uniform);
  ASSERT_EQ(dyn.lengths.size(), static_cast<size_t>(kLayers * kKvHeads));
  auto profile = load_profile(f.options.profile);
  ASSERT_TRUE(profile.ok());
  const std::vector<float> budget = budget_fractions(*profile, 0.25, f.options.alpha);
  for (int l = 0; l < kLayers; ++l) {
    const auto first = dyn.lengths.begin() + l * kKvHeads;
    const int64_t sum = std::accumulate(first, first + kKvHeads, int64_t{0});
    EXPECT_EQ(sum, kKvHeads * uni.lengths[0]) << "layer " << l;  // the same total as uniform
    for (int a = 0; a < kKvHeads; ++a)
      for (int b = 0; b < kKvHeads; ++b) {
        if (budget[static_cast<size_t>(l * kKvHeads + a)] >
            budget[static_cast<size_t>(l * kKvHeads + b)]) {
          EXPECT_GE(first[a], first[b]) << "layer " << l << " heads " << a << ", " << b;
        }
      }
  }
  // Not all equal: the spread follows the profile.
  EXPECT_NE(*std::max_element(dyn.lengths.begin(), dyn.lengths.end()),
            *std::min_element(dyn.lengths.begin(), dyn.lengths.end()));
}

TEST(SyntheticKv, TangramIsFittedToUniformsPageMemoryAtTheLargestRatio) {
  Fixture f;
  f.options.tangram_group_size =
      2;  // half of uniform's (unified) pages: memory is compared in slots
  const SyntheticKvLayout tg = f.layout(KvPolicy::Tangram);
  const SyntheticKvLayout uni = f.layout(KvPolicy::Uniform);
  EXPECT_EQ(tg.group_size, 2);
  const int64_t limit = uni.footprint_slots(16);
  EXPECT_EQ(limit, uni.footprint_pages(16) * 16 * kKvHeads);
  EXPECT_LE(tg.footprint_slots(16), limit);
  EXPECT_GT(tg.compressor_ratio, 0.0);
  EXPECT_LT(tg.compressor_ratio, 1.0);
  // Its lengths are the Compressor's at the fitted ratio...
  CompressionOptions c;
  c.policy = KvPolicy::Tangram;
  c.ratio = tg.compressor_ratio;
  c.profile = f.options.profile;
  auto comp = Compressor::create(c, f.config, f.rope, 2);
  ASSERT_TRUE(comp.ok()) << comp.message();
  EXPECT_EQ(tg.lengths, (*comp)->target_lengths(3000));
  EXPECT_EQ(tg.footprint_pages(16), (*comp)->predicted_pages(3000, 16));
  // ...and a ratio a little larger no longer fits.
  c.ratio = std::min(1.0, tg.compressor_ratio + 2e-3);
  auto larger = Compressor::create(c, f.config, f.rope, 2);
  ASSERT_TRUE(larger.ok());
  EXPECT_GT((*larger)->predicted_pages(3000, 16) * 16 * 2, limit);
}

TEST(SyntheticKv, FillHoldsTheFootprintAndTheLayoutsLengthsAndPositions) {
  Fixture f;
  const KvShape shape{kLayers, 8, kKvHeads, f.config.head_dim, f.config.head_dim_v};
  for (const KvType type : {KvType::F16, KvType::Q8_0}) {
    for (const KvPolicy policy :
         {KvPolicy::Full, KvPolicy::Uniform, KvPolicy::Dynamic, KvPolicy::Tangram}) {
      SCOPED_TRACE(std::string(kv_policy_name(policy)) + " on " + std::string(kv_type_name(type)));
      const SyntheticKvLayout layout = f.layout(policy);
      PageGeometry geo;
      geo.page_tokens = 16;
      geo.group_size = layout.group_size;
      geo.head_dim = shape.head_dim;
      geo.head_dim_v = shape.head_dim_v;
      geo.type = type;
      auto pool = BlockPool::create(
          geo, static_cast<size_t>(2 * layout.footprint_pages(16)) * geo.page_bytes());
      ASSERT_TRUE(pool.ok()) << pool.message();
      auto cache = PagedKvCache::create(shape, 3100, **pool, layout.map);
      ASSERT_TRUE(cache.ok()) << cache.message();
      ASSERT_TRUE(fill_synthetic_kv(**cache, layout, 3000, f.options, 1).ok());
      PagedKvCache& c = **cache;
      EXPECT_EQ(c.n_positions(), 3000);
      EXPECT_EQ(c.pages_held(), layout.footprint_pages(16));
      EXPECT_EQ((*pool)->used_pages(), layout.footprint_pages(16));
      EXPECT_EQ(c.used_slots(), layout.total_entries());
      for (int l = 0; l < kLayers; ++l)
        for (int h = 0; h < kKvHeads; ++h) {
          const int64_t len = layout.lengths[static_cast<size_t>(l * kKvHeads + h)];
          ASSERT_EQ(c.length(l, h), len);
          // Sink first, recent window last, ascending in between; a decode row sees them all.
          EXPECT_EQ(c.entry_position(l, h, 0), 0);
          EXPECT_EQ(c.entry_position(l, h, len - 1), 2999);
          for (int64_t e = 1; e < len; ++e)
            ASSERT_LT(c.entry_position(l, h, e - 1), c.entry_position(l, h, e))
                << l << "," << h << "," << e;
          EXPECT_EQ(c.head_view(l, h).visible(3000), len);
        }
      // The cache decodes on from there: one more position fits in the reserved pages.
      ASSERT_TRUE(c.reserve(3001).ok());
      EXPECT_TRUE((*pool)->check_consistency().ok());
      // A second fill is refused: the cache is no longer empty.
      EXPECT_FALSE(fill_synthetic_kv(c, layout, 3000, f.options, 1).ok());
    }
  }
}

TEST(SyntheticKv, RefusesBadOptionsAndAMismatchedCache) {
  Fixture f;
  SyntheticKvOptions bad = f.options;
  bad.ratio = 0.0;
  EXPECT_FALSE(synthetic_kv_layout(KvPolicy::Uniform, f.config, f.rope, bad).ok());
  bad = f.options;
  bad.context = 0;
  EXPECT_FALSE(synthetic_kv_layout(KvPolicy::Full, f.config, f.rope, bad).ok());
  bad = f.options;
  bad.profile = f.options.profile + ".missing";  // (temp_dir() would empty the folder)
  EXPECT_FALSE(synthetic_kv_layout(KvPolicy::Tangram, f.config, f.rope, bad).ok());
  EXPECT_FALSE(synthetic_kv_layout(KvPolicy::Dynamic, f.config, f.rope, bad).ok());
  // A cache paged by another map than the layout's.
  const SyntheticKvLayout tg = f.layout(KvPolicy::Tangram);
  const SyntheticKvLayout uni = f.layout(KvPolicy::Uniform);
  PageGeometry geo;
  geo.group_size = kKvHeads;
  geo.head_dim = f.config.head_dim;
  geo.head_dim_v = f.config.head_dim_v;
  auto pool =
      BlockPool::create(geo, static_cast<size_t>(uni.footprint_pages(16) + 4) * geo.page_bytes());
  ASSERT_TRUE(pool.ok());
  auto cache = PagedKvCache::create({kLayers, 8, kKvHeads, f.config.head_dim, f.config.head_dim_v},
                                    3100, **pool, uni.map);
  ASSERT_TRUE(cache.ok());
  EXPECT_FALSE(fill_synthetic_kv(**cache, tg, 3000, f.options, 1).ok());
  EXPECT_TRUE(fill_synthetic_kv(**cache, uni, 3000, f.options, 1).ok());
}

}  // namespace
}  // namespace tangram
