// Every case of llama.cpp's tokenizer test vectors (ids produced by the original Hugging Face
// tokenizers, add_special=false, parse_special=false) against the vocab-only GGUFs, and against
// the same vocabularies rebuilt from the tiktoken rank files.
#include <gtest/gtest.h>

#include "tokenizer_test_util.h"

namespace tangram::testing {
namespace {

void expect_all_cases(const Tokenizer& tok, const std::string& vectors) {
  const std::vector<VectorCase> cases = load_llama_cpp_vectors(vectors);
  ASSERT_EQ(cases.size(), 46u) << vectors;
  int mismatches = 0;
  for (const VectorCase& c : cases) {
    const std::vector<int32_t> got =
        tok.encode(c.text, /*add_special=*/false, /*parse_special=*/false);
    if (got != c.ids) {
      ++mismatches;
      ADD_FAILURE() << vectors << ": text \"" << escape(c.text) << "\"\n  expected "
                    << ids_to_string(c.ids) << "\n  got      " << ids_to_string(got);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(LlamaCppVectors, LlamaSpm) { expect_all_cases(gguf_tokenizer("llama-spm"), "llama-spm"); }
TEST(LlamaCppVectors, Phi3) { expect_all_cases(gguf_tokenizer("phi-3"), "phi-3"); }
TEST(LlamaCppVectors, Gpt2) { expect_all_cases(gguf_tokenizer("gpt-2"), "gpt-2"); }
TEST(LlamaCppVectors, LlamaBpe) { expect_all_cases(gguf_tokenizer("llama-bpe"), "llama-bpe"); }
TEST(LlamaCppVectors, Qwen2) { expect_all_cases(gguf_tokenizer("qwen2"), "qwen2"); }

TEST(LlamaCppVectors, Llama3TiktokenReproducesLlamaBpe) {
  expect_all_cases(llama3_tiktoken_tokenizer(), "llama-bpe");
}
TEST(LlamaCppVectors, QwenTiktokenReproducesQwen2) {
  expect_all_cases(qwen_tiktoken_tokenizer(), "qwen2");
}
// The Llama 2 SentencePiece model is the vocabulary of ggml-vocab-llama-spm.gguf.
TEST(LlamaCppVectors, Llama2SentencePieceReproducesLlamaSpm) {
  expect_all_cases(llama2_sentencepiece_tokenizer(), "llama-spm");
}

// add_special adds BOS exactly when the vocabulary asks for it.
TEST(LlamaCppVectors, AddSpecialFollowsVocabFlags) {
  const Tokenizer& spm = gguf_tokenizer("llama-spm");
  EXPECT_EQ(spm.encode("Hello world", true, false), (std::vector<int32_t>{1, 15043, 3186}));
  EXPECT_EQ(spm.encode("", true, false), (std::vector<int32_t>{1}));
  const Tokenizer& llama3 = gguf_tokenizer("llama-bpe");
  EXPECT_EQ(llama3.encode("Hello", true, false).front(), 128000);
  const Tokenizer& qwen = gguf_tokenizer("qwen2");
  EXPECT_EQ(qwen.encode("Hello", true, false), qwen.encode("Hello", false, false));
}

}  // namespace
}  // namespace tangram::testing
