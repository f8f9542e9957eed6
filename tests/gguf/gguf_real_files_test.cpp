// Reading real GGUF files from shared/: a small pretrained Llama and a vocab-only file.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "gguf/gguf_file.h"
#include "support/test_support.h"

namespace tangram {
namespace {

using testing::data_file;

TEST(GgufRealFiles, Stories260K) {
  const auto path = data_file("models/stories260K/stories260K.gguf").string();
  auto r = GgufFile::open(path);
  ASSERT_TRUE(r.ok()) << r.message();
  const GgufFile& f = **r;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.metadata().size(), 19u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("llama.block_count"), 5);
  EXPECT_EQ(f.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(f.get_int("tokenizer.ggml.seperator_token_id"), 4294967295);
  EXPECT_FLOAT_EQ(static_cast<float>(*f.get_float("llama.attention.layer_norm_rms_epsilon")),
                  1e-5f);

  const auto* tokens = f.get_string_array("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[0], "<unk>");
  EXPECT_EQ((*tokens)[1], "<s>");
  ASSERT_NE(f.get_float_array("tokenizer.ggml.scores"), nullptr);
  EXPECT_EQ(f.get_float_array("tokenizer.ggml.scores")->size(), 512u);
  ASSERT_NE(f.get_int_array("tokenizer.ggml.token_type"), nullptr);
  EXPECT_EQ(f.get_int_array("tokenizer.ggml.token_type")->at(0), 2);
  EXPECT_EQ(f.find("tokenizer.ggml.tokens")->to_string(2), "[\"<unk>\", \"<s>\", ... (512 items)]");

  ASSERT_EQ(f.tensors().size(), 48u);
  const GgufTensorInfo* emb = f.find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, GgmlType::F32);
  EXPECT_EQ(emb->n_dims, 2);
  EXPECT_EQ(emb->ne[0], 64);
  EXPECT_EQ(emb->ne[1], 512);
  EXPECT_EQ(emb->nbytes, 64u * 512u * 4u);
  const GgufTensorInfo* down = f.find_tensor("blk.4.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->ne[0], 172);
  EXPECT_EQ(down->ne[1], 64);
  EXPECT_EQ(f.tensors().back().name, "blk.4.ffn_norm.weight");
  EXPECT_EQ(f.data_offset() + f.tensors().back().offset + f.tensors().back().nbytes, f.file_size());

  // The embedding table must equal the one in the llama2.c export of the same model, which
  // follows its 7-int header: [512][64] f32.
  const TensorView v = f.view("token_embd.weight");
  ASSERT_EQ(v.nbytes, 512u * 64u * 4u);
  std::ifstream bin(data_file("models/stories260K/stories260K.bin"), std::ios::binary);
  std::vector<char> ref(v.nbytes);
  bin.seekg(7 * 4);
  bin.read(ref.data(), static_cast<std::streamsize>(ref.size()));
  ASSERT_TRUE(bin.good());
  EXPECT_EQ(std::memcmp(v.data, ref.data(), v.nbytes), 0);
  float first;
  std::memcpy(&first, v.row(0), 4);
  EXPECT_FLOAT_EQ(first, -0.29474878f);
}

TEST(GgufRealFiles, VocabOnlyLlamaSpm) {
  const auto path = data_file("models/llama.cpp-vocab/ggml-vocab-llama-spm.gguf").string();
  auto r = GgufFile::open(path);
  ASSERT_TRUE(r.ok()) << r.message();
  const GgufFile& f = **r;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.metadata().size(), 22u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "default");
  EXPECT_EQ(f.get_int("llama.vocab_size"), 32000);
  EXPECT_EQ(f.get_bool("tokenizer.ggml.add_bos_token"), true);
  EXPECT_EQ(f.get_bool("tokenizer.ggml.add_eos_token"), false);
  const auto* tokens = f.get_string_array("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  ASSERT_EQ(tokens->size(), 32000u);
  EXPECT_EQ((*tokens)[2], "</s>");
  EXPECT_EQ(f.get_float_array("tokenizer.ggml.scores")->size(), 32000u);
  EXPECT_EQ(f.get_int_array("tokenizer.ggml.token_type")->size(), 32000u);
  // The file ends right after the metadata (no padding): the data section is empty.
  EXPECT_EQ(f.data_offset(), f.file_size());
}

TEST(GgufRealFiles, AllVocabFilesOpen) {
  // Larger tokenizer-only files: BPE merges, Qwen2's 151k vocabulary.
  const struct {
    const char* file;
    size_t n_tokens;
    bool has_merges;
  } cases[] = {
      {"ggml-vocab-gpt-2.gguf", 50257, true},
      {"ggml-vocab-llama-bpe.gguf", 128256, true},
      {"ggml-vocab-phi-3.gguf", 32064, false},
      {"ggml-vocab-qwen2.gguf", 151936, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    auto r = GgufFile::open(data_file(std::string("models/llama.cpp-vocab/") + c.file).string());
    ASSERT_TRUE(r.ok()) << r.message();
    const auto* tokens = (*r)->get_string_array("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(tokens->size(), c.n_tokens);
    EXPECT_EQ((*r)->get_string_array("tokenizer.ggml.merges") != nullptr, c.has_merges);
  }
}

}  // namespace
}  // namespace tangram
