// The real stories260K model (Karpathy's TinyStories Llama, F32): logits for the prompt
// "Once upon a time" must match llama2.c's run.c (expected/logits_once_upon_a_time.json)
// within 1e-4 at every position, and greedy decoding must reproduce the 32-token continuation.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "model_test_util.h"

namespace tangram::testing {
namespace {

constexpr double kTolerance = 1e-4;  // run.c fp32 vs llama.cpp agree to 1.05e-5

struct Expected {
  std::vector<int32_t> tokens;
  std::vector<std::vector<double>> logits;  // [pos][512]
  std::vector<int32_t> greedy;
};

Expected read_expected() {
  std::ifstream in(data_file("models/stories260K/expected/logits_once_upon_a_time.json"));
  const auto j = nlohmann::json::parse(in);
  Expected e;
  e.tokens = j.at("tokens").get<std::vector<int32_t>>();
  e.logits = j.at("logits").get<std::vector<std::vector<double>>>();
  e.greedy = j.at("greedy").get<std::vector<int32_t>>();
  return e;
}

std::string model_path() { return data_file("models/stories260K/stories260K.gguf").string(); }

int32_t argmax(const float* x, int64_t n) {
  return static_cast<int32_t>(std::max_element(x, x + n) - x);
}

TEST(Stories260K, ConfigIsReadFromMetadata) {
  auto model = load_model(model_path());
  ASSERT_NE(model, nullptr);
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.arch, Arch::Llama);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_ff, 172);
  EXPECT_EQ(c.n_head, 8);
  EXPECT_EQ(c.n_kv_head, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.rope_dim, 8);
  EXPECT_EQ(c.vocab, 512);
  EXPECT_EQ(c.rope_layout, RopeLayout::Interleaved);
  EXPECT_DOUBLE_EQ(c.rope_base, 10000.0);
  EXPECT_FALSE(c.tied_output);
}

class Stories260KThreads : public ::testing::TestWithParam<int> {};

TEST_P(Stories260KThreads, PrefillLogitsMatchRunC) {
  const Expected e = read_expected();
  auto model = load_model(model_path());
  ASSERT_NE(model, nullptr);
  ThreadPool pool(GetParam());
  for (KvType kv : {KvType::F32, KvType::F16}) {
    auto cache = model->new_cache(64, kv);
    const auto n = static_cast<int64_t>(e.tokens.size());
    std::vector<float> logits(static_cast<size_t>(n * 512));
    ASSERT_TRUE(model->forward(*cache, e.tokens.data(), n, 0, logits.data(), pool, true).ok());
    // An f16 cache rounds K and V to 11 significant bits (llama.cpp sees ~1e-2 with it).
    const double tol = kv == KvType::F32 ? kTolerance : 2e-2;
    for (int64_t p = 0; p < n; ++p)
      EXPECT_LE(max_abs_diff(logits.data() + p * 512, e.logits[static_cast<size_t>(p)].data(), 512),
                tol)
          << "position " << p << " kv " << kv_type_name(kv);
  }
}

TEST_P(Stories260KThreads, DecodeLogitsAndGreedyContinuationMatchRunC) {
  const Expected e = read_expected();
  auto model = load_model(model_path());
  ASSERT_NE(model, nullptr);
  ThreadPool pool(GetParam());
  auto cache = model->new_cache(0);
  std::vector<float> logits(512);
  int64_t pos = 0;
  for (int32_t t : e.tokens) {
    ASSERT_TRUE(model->forward(*cache, &t, 1, pos, logits.data(), pool).ok());
    EXPECT_LE(max_abs_diff(logits.data(), e.logits[static_cast<size_t>(pos)].data(), 512),
              kTolerance)
        << "position " << pos;
    ++pos;
  }
  std::vector<int32_t> generated;
  for (size_t i = 0; i < e.greedy.size(); ++i) {
    const int32_t next = argmax(logits.data(), 512);
    generated.push_back(next);
    ASSERT_TRUE(model->forward(*cache, &next, 1, pos++, logits.data(), pool).ok());
  }
  EXPECT_EQ(generated, e.greedy);
}

INSTANTIATE_TEST_SUITE_P(Threads, Stories260KThreads, ::testing::Values(1, 2));

// The test reference itself reproduces run.c, which vouches for it on the llama layout.
TEST(Stories260K, ReferenceForwardMatchesRunC) {
  const Expected e = read_expected();
  auto g = GgufFile::open(model_path());
  ASSERT_TRUE(g.ok()) << g.message();
  RefParams p;
  p.n_layers = 5;
  p.n_embd = 64;
  p.n_ff = 172;
  p.n_head = 8;
  p.n_kv_head = 4;
  p.head_dim = 8;
  p.vocab = 512;
  p.rms_eps = 1e-5;
  const ReferenceModel ref(**g, p);
  const auto logits = ref.forward(e.tokens);
  for (size_t pos = 0; pos < e.tokens.size(); ++pos)
    EXPECT_LE(max_abs_diff(logits.data() + pos * 512, e.logits[pos].data(), 512), kTolerance)
        << "position " << pos;
}

}  // namespace
}  // namespace tangram::testing
