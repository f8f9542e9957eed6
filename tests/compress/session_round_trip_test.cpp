// Sessions compressed by every policy survive serialisation: a generated model prefills a prompt,
// the compressor shrinks the cache (full, uniform, dynamic, tangram with groups of 4 and with
// unified pages), a few more tokens are decoded after the compaction, and the session is encoded
// and decoded into a fresh pool. The restored cache holds the same lengths, positions and bytes,
// its attention equals the original's bit for bit, and the model continues both identically
// (equal logits). Sessions of another model carry another model fingerprint.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>

#include "compress/compressor.h"
#include "compress/profile.h"
#include "compress_test_util.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "store/session_codec.h"
#include "store/session_test_util.h"
#include "support/test_support.h"
#include "synth/synth.h"

namespace tangram {
namespace {

std::string model_path(uint64_t seed) {
  auto spec = synth_preset("tiny-qwen3");
  spec->n_layers = 2;
  spec->n_kv_head = 8;
  spec->n_head = 16;
  spec->ctx = 1024;
  spec->seed = seed;
  const std::string path = testing::temp_path(fmt::format("session-model-{}.gguf", seed)).string();
  EXPECT_TRUE(write_synth_model(*spec, path, 1).ok());
  return path;
}

Model& test_model() {
  static std::unique_ptr<Model> m = [] {
    auto r = Model::load(model_path(1));
    EXPECT_TRUE(r.ok()) << r.message();
    return std::move(r).value();
  }();
  return *m;
}

std::vector<int32_t> tokens(int64_t n, uint32_t seed, int64_t vocab) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(3, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = d(rng);
  return t;
}

// A tangram profile with per-head fractions spread over [0.05, 0.37]; returns its path.
std::string write_profile(const ModelConfig& c) {
  std::vector<float> fractions;
  for (int i = 0; i < c.n_layers * c.n_kv_head; ++i)
    fractions.push_back(0.05f + 0.08f * static_cast<float>(i % 5));
  return testing::write_test_profile(fractions, c.n_layers, c.n_kv_head, "session-profile.json");
}

struct PolicyCase {
  KvPolicy policy;
  int group_size;  // tangram only
  KvType type;
  const char* name;
};

class SessionPolicies : public ::testing::TestWithParam<PolicyCase> {};

TEST_P(SessionPolicies, RoundTripKeepsAttentionAndContinuationExact) {
  const PolicyCase pc = GetParam();
  Model& m = test_model();
  const ModelConfig& cfg = m.config();
  ThreadPool threads(2);
  CompressionOptions o;
  o.policy = pc.policy;
  o.ratio = pc.policy == KvPolicy::Full ? 1.0 : 0.3;
  o.sink = 4;
  o.window = 16;
  o.scorer.name = "keydiff";
  std::string profile_bytes;
  if (pc.policy == KvPolicy::Tangram) {
    o.profile = write_profile(cfg);
    profile_bytes = testing::read_file(o.profile);
  }
  auto comp = Compressor::create(o, cfg, m.rope(), pc.group_size);
  ASSERT_TRUE(comp.ok()) << comp.message();
  const std::shared_ptr<const HeadGroupMap> map = (*comp)->group_map();
  PageGeometry geo{16, map->group_size(), cfg.head_dim, cfg.head_dim_v, pc.type};
  auto pool = BlockPool::create(geo, 16u << 20, false);
  ASSERT_TRUE(pool.ok()) << pool.message();
  auto cache = PagedKvCache::create(m.kv_shape(), 1024, **pool, map);
  ASSERT_TRUE(cache.ok()) << cache.message();
  PagedKvCache& original = **cache;

  // Prefill, compress, then decode a few tokens after the compaction.
  auto history = tokens(300, 5, cfg.vocab);
  ASSERT_TRUE(m.forward(original, history.data(), 300, 0, nullptr, threads).ok());
  if (o.compresses()) {
    auto rep = (*comp)->compress(original, nullptr, 0, 0, threads);
    ASSERT_TRUE(rep.ok()) << rep.message();
    EXPECT_LT(rep->entries_after, rep->entries_before);
  }
  for (const int32_t t : tokens(6, 6, cfg.vocab)) {
    ASSERT_TRUE(m.forward(original, &t, 1, original.n_positions(), nullptr, threads).ok());
    history.push_back(t);
  }

  if (pc.policy == KvPolicy::Tangram) {
    EXPECT_EQ(map->group_size(), pc.group_size);
    // The default global clustering: ceil(L·H / G) groups, which may span layers.
    EXPECT_EQ(map->total_groups(),
              (cfg.n_layers * cfg.n_kv_head + pc.group_size - 1) / pc.group_size);
  }
  // Ragged per-head lengths (unified tangram gives every head of a layer its group's budget).
  if ((pc.policy == KvPolicy::Tangram && pc.group_size < cfg.n_kv_head) ||
      pc.policy == KvPolicy::Dynamic) {
    std::set<int64_t> lengths;
    for (int l = 0; l < cfg.n_layers; ++l)
      for (int h = 0; h < cfg.n_kv_head; ++h) lengths.insert(original.length(l, h));
    EXPECT_GT(lengths.size(), 1u);
  }

  const SessionFingerprint fp{model_fingerprint(m.gguf()), pc.type,
                              bytes_fingerprint(profile_bytes), group_map_fingerprint(*map)};
  auto blob = encode_session(original, history, fp);
  ASSERT_TRUE(blob.ok()) << blob.message();
  auto fresh_pool = BlockPool::create(geo, 16u << 20, false);
  ASSERT_TRUE(fresh_pool.ok());
  auto got = decode_session(*blob, fp, **fresh_pool, map, m.kv_shape(), 1024);
  ASSERT_TRUE(got.ok()) << got.message();
  PagedKvCache& restored = *got->cache;
  EXPECT_EQ(got->tokens, history);
  EXPECT_TRUE(testing::same_cache(original, restored));
  EXPECT_TRUE(testing::same_attention(original, restored, 3, threads));
  EXPECT_EQ(restored.pages_held(), testing::pages_for_entries(original));

  // The next turn runs identically on both.
  const auto next = tokens(5, 7, cfg.vocab);
  std::vector<float> la(static_cast<size_t>(cfg.vocab)),
      lb(static_cast<size_t>(cfg.vocab));  // [vocab]
  ASSERT_TRUE(m.forward(original, next.data(), 5, original.n_positions(), la.data(), threads).ok());
  ASSERT_TRUE(m.forward(restored, next.data(), 5, restored.n_positions(), lb.data(), threads).ok());
  EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0);
  EXPECT_TRUE(testing::same_cache(original, restored));

  // Another model's sessions are told apart.
  static const uint64_t other_model = [] {
    auto other = GgufFile::open(model_path(2));
    EXPECT_TRUE(other.ok()) << other.message();
    return other.ok() ? model_fingerprint(**other) : 0;
  }();
  SessionFingerprint other_fp = fp;
  other_fp.model = other_model;
  EXPECT_NE(other_fp.model, fp.model);
  auto refused = decode_session(*blob, other_fp, **fresh_pool, map, m.kv_shape(), 1024);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("model fingerprint differs"), std::string::npos)
      << refused.message();
}

INSTANTIATE_TEST_SUITE_P(
    Policies, SessionPolicies,
    ::testing::Values(PolicyCase{KvPolicy::Full, 0, KvType::F16, "full_f16"},
                      PolicyCase{KvPolicy::Uniform, 0, KvType::F32, "uniform_f32"},
                      PolicyCase{KvPolicy::Dynamic, 0, KvType::F16, "dynamic_f16"},
                      PolicyCase{KvPolicy::Dynamic, 0, KvType::F32, "dynamic_f32"},
                      PolicyCase{KvPolicy::Tangram, 4, KvType::F16, "tangram_G4_f16"},
                      PolicyCase{KvPolicy::Tangram, 4, KvType::F32, "tangram_G4_f32"},
                      PolicyCase{KvPolicy::Tangram, 8, KvType::F16, "tangram_unified_f16"}),
    [](const auto& tinfo) { return std::string(tinfo.param.name); });

}  // namespace
}  // namespace tangram
