// Vocabularies built from tiktoken rank files: special ids, equality with llama.cpp's GGUF
// vocabularies, agreement on random text, and rejection of malformed files.
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/byte_level.h"
#include "tokenizer/tiktoken_vocab.h"
#include "tokenizer_test_util.h"

namespace tangram::testing {
namespace {

TEST(TiktokenVocab, Llama3SpecialTokenIds) {
  const Tokenizer& t = llama3_tiktoken_tokenizer();
  EXPECT_EQ(t.n_vocab(), 128256);
  EXPECT_EQ(t.token_id("<|begin_of_text|>"), 128000);
  EXPECT_EQ(t.token_id("<|end_of_text|>"), 128001);
  EXPECT_EQ(t.token_id("<|start_header_id|>"), 128006);
  EXPECT_EQ(t.token_id("<|end_header_id|>"), 128007);
  EXPECT_EQ(t.token_id("<|eom_id|>"), 128008);
  EXPECT_EQ(t.token_id("<|eot_id|>"), 128009);
  EXPECT_EQ(t.token_id("<|reserved_special_token_247|>"), 128255);
  EXPECT_EQ(t.bos(), 128000);
  EXPECT_EQ(t.eos(), 128001);
  EXPECT_EQ(t.eot(), 128009);
  EXPECT_TRUE(t.add_bos());
  EXPECT_EQ(t.vocab().pre, "llama-bpe");
  for (int32_t id : {128001, 128008, 128009}) EXPECT_TRUE(t.is_eog(id)) << id;
  EXPECT_FALSE(t.is_eog(128000));
  EXPECT_FALSE(t.is_eog(128006));
  EXPECT_TRUE(t.is_control(128006));
  EXPECT_FALSE(t.is_control(1000));
}

TEST(TiktokenVocab, QwenSpecialTokenIds) {
  const Tokenizer& t = qwen_tiktoken_tokenizer();
  EXPECT_EQ(t.n_vocab(), 151665);
  EXPECT_EQ(t.token_id("<|endoftext|>"), 151643);
  EXPECT_EQ(t.token_id("<|im_start|>"), 151644);
  EXPECT_EQ(t.token_id("<|im_end|>"), 151645);
  EXPECT_EQ(t.token_id("<tool_call>"), 151657);
  EXPECT_EQ(t.token_id("<|file_sep|>"), 151664);
  EXPECT_EQ(t.token_type(151657), TokenType::kUserDefined);
  EXPECT_EQ(t.eos(), 151645);
  EXPECT_FALSE(t.add_bos());
  EXPECT_TRUE(t.is_eog(151643));
  EXPECT_TRUE(t.is_eog(151645));
  EXPECT_FALSE(t.is_eog(151644));
  EXPECT_EQ(t.vocab().pre, "qwen2");
}

// The merges derived from Llama 3's ranks are exactly those of llama.cpp's converted GGUF.
TEST(TiktokenVocab, Llama3TokensAndMergesEqualTheGguf) {
  const Vocab& ours = llama3_tiktoken_tokenizer().vocab();
  const Vocab& gguf = gguf_tokenizer("llama-bpe").vocab();
  ASSERT_EQ(ours.tokens.size(), gguf.tokens.size());
  for (size_t i = 0; i < 128000; ++i) ASSERT_EQ(ours.tokens[i], gguf.tokens[i]) << i;
  EXPECT_EQ(ours.merges, gguf.merges);
  // The GGUF is Llama 3.0 (reserved names); the specials agree on the ids that matter.
  for (int32_t id : {128000, 128001, 128006, 128007, 128009}) {
    EXPECT_EQ(ours.tokens[static_cast<size_t>(id)], gguf.tokens[static_cast<size_t>(id)]);
  }
}

// Qwen's merges.txt was trained separately, so the lists differ, yet both give the same ids.
TEST(TiktokenVocab, QwenAgreesWithTheGgufOnRandomText) {
  const Tokenizer& ours = qwen_tiktoken_tokenizer();
  const Tokenizer& gguf = gguf_tokenizer("qwen2");
  for (size_t i = 0; i < 151643; ++i) {
    ASSERT_EQ(ours.vocab().tokens[i], gguf.vocab().tokens[i]) << i;
  }
  const std::vector<std::string> parts = {
      "the", " the", "ing", " ", "  ", "\n",  "\n\n", "\t",    "é",      "日本",  "语",   "😀",
      "1",   "2345", ".",   ",", "'s", "'LL", "-",    "Hello", " world", "ж",     "ß",    "\u00a0",
      "<",   ">",    "{",   "}", "()", "://", "_x",   "Việt",  "🚀🚀",     " 3.14", "\r\n",
  };
  std::mt19937 rng(99);
  int mismatches = 0;
  for (int n = 0; n < 400; ++n) {
    std::string text;
    const auto len = static_cast<uint32_t>(1 + rng() % 20);
    for (uint32_t i = 0; i < len; ++i) text += parts[rng() % parts.size()];
    const auto a = ours.encode(text, false, false);
    const auto b = gguf.encode(text, false, false);
    if (a != b && ++mismatches <= 5) {
      ADD_FAILURE() << escape(text) << ": tiktoken " << ids_to_string(a) << " gguf "
                    << ids_to_string(b);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(TiktokenVocab, SmallFileBuildsMergesFromRanks) {
  // "a"=0 "b"=1 "ab"=2 "abb"=3 "bb"=4 (base64: YQ== Yg== YWI= YWJi YmI=)
  auto v =
      vocab_from_tiktoken("YQ== 0\nYg== 1\r\nYWI= 2\nYWJi 3\nYmI= 4\n", TiktokenFlavor::kQwen2);
  ASSERT_TRUE(v.ok()) << v.message();
  EXPECT_EQ(v->n_tokens(), 5 + 22);
  // "abb" splits as ab+b (ranks 2,1) and a+bb (ranks 0,4): ordered by left rank.
  EXPECT_EQ(v->merges, (std::vector<std::string>{"a b", "a bb", "ab b", "b b"}));
  auto t = Tokenizer::from_vocab(std::move(v.value()));
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ((*t)->encode("abb", false, false), (std::vector<int32_t>{3}));
  EXPECT_EQ((*t)->encode("abab", false, false), (std::vector<int32_t>{2, 2}));
}

TEST(TiktokenVocab, RejectsMalformedFiles) {
  EXPECT_FALSE(vocab_from_tiktoken("", TiktokenFlavor::kLlama3).ok());
  EXPECT_FALSE(vocab_from_tiktoken("YQ==\n", TiktokenFlavor::kLlama3).ok());    // no rank
  EXPECT_FALSE(vocab_from_tiktoken("Y!== 0\n", TiktokenFlavor::kLlama3).ok());  // bad base64
  EXPECT_FALSE(vocab_from_tiktoken("YQ== 0\nYg== 0\n", TiktokenFlavor::kLlama3).ok());  // duplicate
  EXPECT_FALSE(vocab_from_tiktoken("YQ== 0\nYg== 2\n", TiktokenFlavor::kLlama3).ok());  // gap
  EXPECT_FALSE(vocab_from_tiktoken("YQ== 999999999\n", TiktokenFlavor::kLlama3).ok());  // huge
  EXPECT_FALSE(vocab_from_tiktoken("YQ== -1\n", TiktokenFlavor::kLlama3).ok());
  EXPECT_FALSE(load_tiktoken_vocab("/nonexistent/tokenizer.model", TiktokenFlavor::kLlama3).ok());
}

TEST(ByteLevel, AlphabetIsABijection) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const std::string text = bytes_to_byte_level(all);
  EXPECT_EQ(byte_level_to_bytes(text), all);
  EXPECT_EQ(bytes_to_byte_level(" "), "\xC4\xA0");   // "Ġ"
  EXPECT_EQ(bytes_to_byte_level("\n"), "\xC4\x8A");  // "Ċ"
  EXPECT_EQ(bytes_to_byte_level("A"), "A");
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(codepoint_to_byte(byte_to_codepoint(static_cast<uint8_t>(b))), b);
  }
  EXPECT_FALSE(codepoint_to_byte(0x41 + 0x1000).has_value());
}

}  // namespace
}  // namespace tangram::testing
