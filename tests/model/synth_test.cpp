// Synthetic model writer: determinism, types, presets and vocabulary.
#include <gtest/gtest.h>

#include "model_test_util.h"

namespace tangram::testing {
namespace {

TEST(Synth, SameSeedSameFileOtherSeedOtherWeights) {
  SynthSpec s = *synth_preset("tiny-llama");
  ASSERT_TRUE(synth_set_weight_type(s, "q8_0").ok());
  const std::string a = read_file(write_synth(s, "a.gguf"));
  const std::string b = read_file(write_synth(s, "b.gguf"));
  EXPECT_EQ(a, b);
  s.seed = 2;
  const std::string c = read_file(write_synth(s, "c.gguf"));
  EXPECT_EQ(a.size(), c.size());
  EXPECT_NE(a, c);
}

TEST(Synth, WeightTypesNormsAndFallback) {
  SynthSpec s = *synth_preset("tiny-qwen2");
  ASSERT_TRUE(synth_set_weight_type(s, "Q6_K").ok());
  s.n_ff = 288;  // ffn_down has 288 columns: not a Q6_K multiple, falls back to Q8_0
  auto g = GgufFile::open(write_synth(s));
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ((*g)->find_tensor("token_embd.weight")->type, GgmlType::Q6_K);
  EXPECT_EQ((*g)->find_tensor("output.weight")->type, GgmlType::Q6_K);
  EXPECT_EQ((*g)->find_tensor("blk.0.attn_q.weight")->type, GgmlType::Q6_K);
  EXPECT_EQ((*g)->find_tensor("blk.0.ffn_down.weight")->type, GgmlType::Q8_0);
  EXPECT_EQ((*g)->find_tensor("blk.0.attn_norm.weight")->type, GgmlType::F32);
  EXPECT_EQ((*g)->find_tensor("blk.0.attn_q.bias")->type, GgmlType::F32);
  EXPECT_EQ((*g)->find_tensor("output_norm.weight")->type, GgmlType::F32);
}

TEST(Synth, Q4KMMix) {
  SynthSpec s = *synth_preset("tiny-llama");
  ASSERT_TRUE(synth_set_weight_type(s, "q4_k_m").ok());
  auto g = GgufFile::open(write_synth(s));
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ((*g)->find_tensor("blk.0.attn_q.weight")->type, GgmlType::Q4_K);
  EXPECT_EQ((*g)->find_tensor("blk.0.ffn_up.weight")->type, GgmlType::Q4_K);
  EXPECT_EQ((*g)->find_tensor("blk.1.attn_v.weight")->type, GgmlType::Q6_K);
  EXPECT_EQ((*g)->find_tensor("blk.1.ffn_down.weight")->type, GgmlType::Q6_K);
  EXPECT_EQ((*g)->find_tensor("output.weight")->type, GgmlType::Q6_K);
  EXPECT_EQ((*g)->find_tensor("token_embd.weight")->type, GgmlType::Q4_K);
}

TEST(Synth, PresetsAndErrors) {
  for (const std::string& name : synth_preset_names()) EXPECT_TRUE(synth_preset(name).ok()) << name;
  const auto q3 = *synth_preset("qwen3-4b-attn");
  EXPECT_EQ(q3.arch, Arch::Qwen3);
  EXPECT_EQ(q3.n_layers, 36);
  EXPECT_EQ(q3.n_head, 32);
  EXPECT_EQ(q3.n_kv_head, 8);
  EXPECT_EQ(q3.head_dim, 128);
  EXPECT_EQ(q3.n_embd, 2560);
  const auto l3 = *synth_preset("llama3-8b-attn");
  EXPECT_EQ(l3.n_layers, 32);
  EXPECT_EQ(l3.n_embd, 4096);
  auto bad = synth_preset("gpt-5");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("gpt-5"), std::string::npos);
  SynthSpec s;
  EXPECT_FALSE(synth_set_weight_type(s, "q3_k").ok());
  s.n_kv_head = 3;
  EXPECT_FALSE(write_synth_model(s, (temp_dir() / "x.gguf").string()).ok());
}

TEST(Synth, DefaultVocabulary) {
  SynthSpec s = *synth_preset("tiny-llama");
  auto g = GgufFile::open(write_synth(s));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ((*g)->get_string("tokenizer.ggml.model"), "llama");
  const auto* tokens = (*g)->get_string_array("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[0], "<unk>");
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ((*tokens)[2], "</s>");
  EXPECT_EQ((*tokens)[3], "<0x00>");
  EXPECT_EQ((*tokens)[258], "<0xFF>");
  const std::set<std::string> unique(tokens->begin(), tokens->end());
  EXPECT_EQ(unique.size(), tokens->size());
  EXPECT_EQ((*g)->get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ((*g)->get_int("tokenizer.ggml.eos_token_id"), 2);
  const auto* types = (*g)->get_int_array("tokenizer.ggml.token_type");
  ASSERT_NE(types, nullptr);
  EXPECT_EQ((*types)[1], 3);
  EXPECT_EQ((*types)[3], 6);
  EXPECT_EQ((*types)[300], 1);
  ASSERT_NE((*g)->get_float_array("tokenizer.ggml.scores"), nullptr);
}

TEST(Synth, VocabCallbackReplacesTheDefault) {
  SynthSpec s = *synth_preset("tiny-llama");
  s.write_vocab = [](GgufWriter& w) { w.set_string("tokenizer.ggml.model", "gpt2"); };
  auto g = GgufFile::open(write_synth(s));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ((*g)->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ((*g)->find("tokenizer.ggml.tokens"), nullptr);
}

}  // namespace
}  // namespace tangram::testing
