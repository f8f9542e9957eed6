// ModelConfig from GGUF metadata and weight binding: what is read, and the Errors for
// unsupported or inconsistent files.
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "model/rope.h"
#include "model/weights.h"
#include "model_test_util.h"

namespace tangram::testing {
namespace {

// Copies a GGUF, leaving out some keys and tensors; `edit` may add or override either.
std::string rewrite_gguf(const std::string& src, const std::string& dst_name,
                         const std::set<std::string>& drop,
                         const std::function<void(GgufWriter&)>& edit = {}) {
  auto g = GgufFile::open(src);
  EXPECT_TRUE(g.ok()) << g.message();
  GgufWriter w;
  for (const GgufKV& kv : (*g)->metadata())
    if (!drop.count(kv.key)) w.set_value(kv.key, kv.value);
  for (const GgufTensorInfo& t : (*g)->tensors()) {
    if (drop.count(t.name)) continue;
    const TensorView v = (*g)->view(t);
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + std::max(t.n_dims, 1));
    EXPECT_TRUE(w.add_tensor(t.name, t.type, ne, v.data, v.nbytes).ok());
  }
  if (edit) edit(w);
  const std::string dst = (temp_dir() / dst_name).string();
  const Status st = w.write(dst);
  EXPECT_TRUE(st.ok()) << st.message();
  return dst;
}

std::string tiny(const char* preset_name, const std::function<void(SynthSpec&)>& tweak = {}) {
  auto spec = synth_preset(preset_name);
  EXPECT_TRUE(spec.ok());
  if (tweak) tweak(*spec);
  return write_synth(*spec, std::string(preset_name) + ".gguf");
}

Result<ModelConfig> config_of(const std::string& path) {
  auto g = GgufFile::open(path);
  if (!g.ok()) return g.error();
  return read_model_config(**g);
}

std::string load_error(const std::string& path) {
  auto m = Model::load(path);
  return m.ok() ? std::string("(loaded)") : m.message();
}

TEST(ModelConfig, ReadsWhatSynthWrites) {
  for (const char* name : {"tiny-llama", "tiny-qwen2", "tiny-qwen3"}) {
    SCOPED_TRACE(name);
    const SynthSpec spec = *synth_preset(name);
    auto c = config_of(tiny(name));
    ASSERT_TRUE(c.ok()) << c.message();
    const ModelConfig want = synth_config(spec);
    EXPECT_EQ(c->arch, want.arch);
    EXPECT_EQ(c->n_layers, want.n_layers);
    EXPECT_EQ(c->n_embd, want.n_embd);
    EXPECT_EQ(c->n_ff, want.n_ff);
    EXPECT_EQ(c->n_head, want.n_head);
    EXPECT_EQ(c->n_kv_head, want.n_kv_head);
    EXPECT_EQ(c->head_dim, want.head_dim);
    EXPECT_EQ(c->vocab, want.vocab);
    EXPECT_EQ(c->context_length, want.context_length);
    EXPECT_EQ(c->rope_layout, want.rope_layout);
    EXPECT_EQ(c->qkv_bias, want.qkv_bias);
    EXPECT_EQ(c->qk_norm, want.qk_norm);
    EXPECT_DOUBLE_EQ(c->rope_base, want.rope_base);
    EXPECT_FLOAT_EQ(c->rms_eps, want.rms_eps);
  }
  // Qwen3's head size is its own key, not n_embd / n_head.
  auto q3 = config_of(tiny("tiny-qwen3"));
  ASSERT_TRUE(q3.ok());
  EXPECT_EQ(q3->head_dim, 64);
  EXPECT_NE(q3->head_dim, q3->n_embd / q3->n_head);
}

TEST(ModelConfig, DefaultsWhenOptionalKeysAreAbsent) {
  const std::string path = rewrite_gguf(
      tiny("tiny-llama"), "defaults.gguf",
      {"llama.rope.freq_base", "llama.attention.head_count_kv", "llama.attention.key_length",
       "llama.attention.value_length", "llama.rope.dimension_count", "blk.0.attn_k.weight",
       "blk.1.attn_k.weight", "blk.0.attn_v.weight", "blk.1.attn_v.weight"});
  auto c = config_of(path);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_DOUBLE_EQ(c->rope_base, 10000.0);
  EXPECT_EQ(c->n_kv_head, c->n_head);
  EXPECT_EQ(c->head_dim, c->n_embd / c->n_head);
  EXPECT_EQ(c->rope_dim, c->head_dim);
}

TEST(ModelConfig, UnknownArchitectureIsRefusedByName) {
  const std::string path =
      rewrite_gguf(tiny("tiny-llama"), "gpt2.gguf", {"general.architecture"},
                   [](GgufWriter& w) { w.set_string("general.architecture", "gpt2"); });
  const std::string err = load_error(path);
  EXPECT_NE(err.find("unsupported architecture 'gpt2'"), std::string::npos) << err;
}

TEST(ModelConfig, MissingRequiredKeyIsAnError) {
  const std::string path =
      rewrite_gguf(tiny("tiny-qwen2"), "nokey.gguf", {"qwen2.embedding_length"});
  const std::string err = load_error(path);
  EXPECT_NE(err.find("qwen2.embedding_length"), std::string::npos) << err;
}

TEST(ModelConfig, InconsistentHeadCountsAreAnError) {
  const std::string path = rewrite_gguf(tiny("tiny-llama"), "heads.gguf", {}, [](GgufWriter& w) {
    w.set_u32("llama.attention.head_count_kv", 3);  // 8 heads are not a multiple of 3
  });
  const std::string err = load_error(path);
  EXPECT_NE(err.find("head_count_kv"), std::string::npos) << err;
}

TEST(ModelConfig, UnsupportedRopeScalingIsAnError) {
  const std::string path = rewrite_gguf(tiny("tiny-qwen2"), "yarn.gguf", {}, [](GgufWriter& w) {
    w.set_string("qwen2.rope.scaling.type", "yarn");
  });
  const std::string err = load_error(path);
  EXPECT_NE(err.find("yarn"), std::string::npos) << err;
}

TEST(ModelWeights, MissingTensorIsNamed) {
  const std::string path =
      rewrite_gguf(tiny("tiny-qwen3"), "missing.gguf", {"blk.1.attn_k_norm.weight"});
  const std::string err = load_error(path);
  EXPECT_NE(err.find("missing tensor 'blk.1.attn_k_norm.weight'"), std::string::npos) << err;
  const std::string path2 = rewrite_gguf(tiny("tiny-qwen2"), "nobias.gguf", {"blk.0.attn_v.bias"});
  const std::string err2 = load_error(path2);
  EXPECT_NE(err2.find("blk.0.attn_v.bias"), std::string::npos) << err2;
}

TEST(ModelWeights, WrongShapeIsNamed) {
  const std::string path =
      rewrite_gguf(tiny("tiny-llama"), "shape.gguf", {"blk.1.ffn_down.weight"}, [](GgufWriter& w) {
        std::vector<float> data(256 * 256, 0.0f);  // (256, 256) instead of (512, 256)
        ASSERT_TRUE(w.add_tensor("blk.1.ffn_down.weight", GgmlType::F32, {256, 256}, data.data(),
                                 data.size() * sizeof(float))
                        .ok());
      });
  const std::string err = load_error(path);
  EXPECT_NE(err.find("'blk.1.ffn_down.weight' has shape [256, 256], expected [512, 256]"),
            std::string::npos)
      << err;
}

TEST(ModelWeights, TiedOutputUsesTheEmbedding) {
  auto model = load_model(tiny("tiny-llama", [](SynthSpec& s) { s.tied_output = true; }));
  ASSERT_NE(model, nullptr);
  EXPECT_TRUE(model->config().tied_output);
  EXPECT_EQ(model->weights().output.data, model->weights().token_embd.data);
  auto untied = load_model(tiny("tiny-qwen2"));
  ASSERT_NE(untied, nullptr);
  EXPECT_NE(untied->weights().output.data, untied->weights().token_embd.data);
}

// Llama-3 scaling written as keys (computed at load) and as llama.cpp's rope_freqs tensor give
// the same model; the divisors follow the published formula.
TEST(RopeScaling, Llama3KeysAndTensorAgree) {
  const auto make = [](SynthRopeScaling how, const char* file) {
    SynthSpec s = *synth_preset("tiny-llama");
    s.llama3_rope = how;
    s.rope_original_context = 32;
    return write_synth(s, file);
  };
  auto a = load_model(make(SynthRopeScaling::Llama3Keys, "keys.gguf"));
  auto b = load_model(make(SynthRopeScaling::Llama3Tensor, "tensor.gguf"));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->config().rope_scaling, RopeScaling::Llama3);
  EXPECT_EQ(b->config().rope_scaling, RopeScaling::Llama3);
  EXPECT_EQ(a->weights().rope_freq_factors, b->weights().rope_freq_factors);
  const auto expect = reference_llama3_divisors(32, 10000.0, 8.0, 1.0, 4.0, 32.0);
  ASSERT_EQ(a->weights().rope_freq_factors.size(), expect.size());
  bool some_scaled = false;
  for (size_t i = 0; i < expect.size(); ++i) {
    EXPECT_NEAR(a->weights().rope_freq_factors[i], expect[i], 1e-6 * expect[i]) << i;
    some_scaled |= expect[i] > 1.5;
  }
  EXPECT_TRUE(some_scaled);

  ThreadPool pool(1);
  const auto tokens = random_tokens(40, 512, 5);
  std::vector<float> la(512 * 40), lb(512 * 40);
  auto ca = a->new_cache(64), cb = b->new_cache(64);
  ASSERT_TRUE(a->forward(*ca, tokens.data(), 40, 0, la.data(), pool, true).ok());
  ASSERT_TRUE(b->forward(*cb, tokens.data(), 40, 0, lb.data(), pool, true).ok());
  EXPECT_EQ(max_abs_diff(la.data(), lb.data(), 512 * 40), 0.0);
}

TEST(RopeScaling, LinearDividesPositions) {
  ModelConfig c;
  c.rope_dim = 16;
  c.rope_base = 10000.0;
  const Rope plain(c, {});
  c.rope_scaling = RopeScaling::Linear;
  c.rope_scale_factor = 4.0;
  const Rope linear(c, {});
  std::vector<float> cos_a(8), sin_a(8), cos_b(8), sin_b(8);
  plain.tables(3, 1, cos_a.data(), sin_a.data());
  linear.tables(12, 1, cos_b.data(), sin_b.data());
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_NEAR(cos_a[i], cos_b[i], 1e-6);
    EXPECT_NEAR(sin_a[i], sin_b[i], 1e-6);
  }
}

TEST(RopeScaling, LinearTypeIsRead) {
  const std::string path = rewrite_gguf(tiny("tiny-llama"), "linear.gguf", {}, [](GgufWriter& w) {
    w.set_string("llama.rope.scaling.type", "linear");
    w.set_f32("llama.rope.scaling.factor", 2.0f);
  });
  auto c = config_of(path);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->rope_scaling, RopeScaling::Linear);
  EXPECT_DOUBLE_EQ(c->rope_scale_factor, 2.0);
}

// Angles at large positions are computed in double: position 100000 at the fastest frequency
// must agree with a double-precision evaluation.
TEST(RopeScaling, LongPositionsKeepPrecision) {
  ModelConfig c;
  c.rope_dim = 128;
  c.rope_base = 500000.0;
  const Rope rope(c, {});
  std::vector<float> cs(64), sn(64);
  rope.tables(100000, 1, cs.data(), sn.data());
  for (int i = 0; i < 64; ++i) {
    const double a = 100000.0 * std::pow(500000.0, -2.0 * i / 128);
    EXPECT_NEAR(cs[static_cast<size_t>(i)], std::cos(a), 1e-6) << i;
    EXPECT_NEAR(sn[static_cast<size_t>(i)], std::sin(a), 1e-6) << i;
  }
}

}  // namespace
}  // namespace tangram::testing
