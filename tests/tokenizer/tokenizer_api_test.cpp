// Tokenizer behaviour beyond the reference vectors: round trips (valid and malformed UTF-8),
// special-token parsing, pieces, decoding flags, end-of-generation ids and lookups.
#include <gtest/gtest.h>

#include <algorithm>

#include "tokenizer_test_util.h"

namespace tangram::testing {
namespace {

const std::vector<const char*> kVocabs = {"llama-spm", "phi-3", "gpt-2", "llama-bpe", "qwen2"};

TEST(TokenizerRoundTrip, EveryVectorInputOfEveryVocab) {
  for (const char* name : kVocabs) {
    const Tokenizer& tok = gguf_tokenizer(name);
    for (const VectorCase& c : load_llama_cpp_vectors(name)) {
      EXPECT_EQ(tok.decode(tok.encode(c.text, false, false), true), c.text)
          << name << " " << escape(c.text);
      EXPECT_EQ(tok.decode(tok.encode(c.text, true, false), true), c.text)
          << name << " " << escape(c.text);
    }
  }
}

// Malformed UTF-8 is encoded through byte tokens, so it survives a round trip unchanged.
TEST(TokenizerRoundTrip, MalformedUtf8SurvivesByteForByte) {
  const std::vector<std::string> texts = {
      "\xFF",
      "\xFF\xFE",
      "abc\x80"
      "def",
      "\xE2\x82",
      "caf\xC3",
      "\xED\xA0\x80",
      "\xC0\xAF",
      "ok \xF0\x9F\x98 then",
      "\xF4\x90\x80\x80",
      std::string("nul\0byte", 8),
  };
  for (const char* name : kVocabs) {
    const Tokenizer& tok = gguf_tokenizer(name);
    for (const std::string& text : texts) {
      const auto ids = tok.encode(text, false, false);
      EXPECT_FALSE(ids.empty());
      EXPECT_EQ(tok.decode(ids, true), text) << name << " " << escape(text);
    }
  }
  // SPM: "▁" then the byte token <0xFF> (id 3 + 0xFF).
  EXPECT_EQ(gguf_tokenizer("llama-spm").encode("\xFF", false, false),
            (std::vector<int32_t>{29871, 258}));
}

TEST(TokenizerSpecial, ParseSpecialControlsControlTokens) {
  const Tokenizer& qwen = gguf_tokenizer("qwen2");
  const std::string chat = "<|im_start|>user\nHi<|im_end|>";
  const auto parsed = qwen.encode(chat, false, true);
  ASSERT_GE(parsed.size(), 3u);
  EXPECT_EQ(parsed.front(), 151644);
  EXPECT_EQ(parsed.back(), 151645);
  EXPECT_EQ(qwen.decode(parsed, false), chat);
  EXPECT_EQ(qwen.decode(parsed, true), "user\nHi");
  const auto plain = qwen.encode(chat, false, false);
  for (int32_t id : plain) EXPECT_LT(id, 151643);
  EXPECT_EQ(qwen.decode(plain, true), chat);

  const Tokenizer& llama3 = gguf_tokenizer("llama-bpe");
  const auto l3 =
      llama3.encode("<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>", true, true);
  EXPECT_EQ(l3, (std::vector<int32_t>{128000, 128006, 882, 128007, 271, 13347, 128009}));
}

TEST(TokenizerSpecial, SpmPrefixesTextAfterASpecialToken) {
  const Tokenizer& spm = gguf_tokenizer("llama-spm");
  EXPECT_EQ(spm.encode("<s>Hello", false, true), (std::vector<int32_t>{1, 15043}));
  const auto plain = spm.encode("<s>Hello", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1), 0);
  EXPECT_EQ(spm.decode({1, 15043, 2}, true), "Hello");
  EXPECT_EQ(spm.decode({1, 15043, 2}, false), "<s>Hello</s>");
  EXPECT_EQ(spm.decode(spm.encode("<s>Hello", false, true), true), "Hello");
}

// USER_DEFINED tokens are kept whole even without parse_special, as llama.cpp does (phi-3's
// "</s>" is USER_DEFINED).
TEST(TokenizerSpecial, UserDefinedTokensAlwaysMatch) {
  const Tokenizer& phi3 = gguf_tokenizer("phi-3");
  EXPECT_EQ(phi3.token_type(2), TokenType::kUserDefined);
  const auto ids = phi3.encode("a</s>b", false, false);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 1);
  EXPECT_EQ(phi3.decode(ids, true), "a</s>b");
  EXPECT_TRUE(phi3.is_special(2));
  EXPECT_FALSE(phi3.is_control(2));
}

TEST(TokenizerPieces, TokenToPieceGivesRawBytes) {
  const Tokenizer& spm = gguf_tokenizer("llama-spm");
  EXPECT_EQ(spm.token_to_piece(29871), " ");
  EXPECT_EQ(spm.token_to_piece(15043), " Hello");
  EXPECT_EQ(spm.token_to_piece(13), "\n");     // <0x0A>
  EXPECT_EQ(spm.token_to_piece(258), "\xFF");  // <0xFF>
  EXPECT_EQ(spm.token_to_piece(1), "<s>");
  EXPECT_EQ(spm.token_text(15043), "\xE2\x96\x81Hello");
  const Tokenizer& gpt2 = gguf_tokenizer("gpt-2");
  const auto world = gpt2.token_id("\xC4\xA0world");  // "Ġworld"
  ASSERT_TRUE(world.has_value());
  EXPECT_EQ(gpt2.token_to_piece(*world), " world");
  for (int32_t bad : {-1, -100, gpt2.n_vocab(), 1 << 30}) {
    EXPECT_EQ(gpt2.token_to_piece(bad), "");
    EXPECT_EQ(gpt2.token_text(bad), "");
    EXPECT_FALSE(gpt2.is_eog(bad));
    EXPECT_FALSE(gpt2.is_special(bad));
  }
  EXPECT_EQ(gpt2.decode({-1, *world, 1 << 30}, true), " world");
  EXPECT_FALSE(gpt2.token_id("no such token text").has_value());
}

TEST(TokenizerMetadata, SpecialIdsTemplatesAndEndOfGeneration) {
  const Tokenizer& spm = gguf_tokenizer("llama-spm");
  EXPECT_EQ(spm.n_vocab(), 32000);
  EXPECT_EQ(spm.bos(), 1);
  EXPECT_EQ(spm.eos(), 2);
  EXPECT_TRUE(spm.is_eog(2));
  EXPECT_FALSE(spm.is_eog(1));
  EXPECT_TRUE(spm.chat_template().empty());

  const Tokenizer& phi3 = gguf_tokenizer("phi-3");
  EXPECT_EQ(phi3.eos(), 32000);
  EXPECT_TRUE(phi3.is_eog(32000));   // <|endoftext|>
  EXPECT_TRUE(phi3.is_eog(32007));   // <|end|>
  EXPECT_FALSE(phi3.is_eog(32010));  // <|user|>
  EXPECT_NE(phi3.chat_template().find("<|user|>"), std::string::npos);

  const Tokenizer& qwen = gguf_tokenizer("qwen2");
  EXPECT_TRUE(qwen.is_eog(151643));
  EXPECT_TRUE(qwen.is_eog(151645));  // <|im_end|> by its text
  EXPECT_FALSE(qwen.add_bos());
  EXPECT_NE(qwen.chat_template().find("<|im_start|>"), std::string::npos);

  const Tokenizer& llama3 = gguf_tokenizer("llama-bpe");
  EXPECT_TRUE(llama3.add_bos());
  EXPECT_TRUE(llama3.is_eog(128001));
  EXPECT_TRUE(llama3.is_eog(128009));  // <|eot_id|> by its text
  EXPECT_EQ(llama3.token_id("<|eot_id|>"), 128009);
}

}  // namespace
}  // namespace tangram::testing
