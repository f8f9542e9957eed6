// The PCRE2 pre-tokenizer: the published patterns split as the reference tokenizers do, pieces
// always tile the input, and malformed UTF-8 is isolated instead of reaching the regex.
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/pretokenizer.h"
#include "tokenizer_test_util.h"

namespace tangram::testing {
namespace {

std::vector<std::string> split(std::string_view pre, std::string_view text) {
  auto p = PreTokenizer::create(pre);
  EXPECT_TRUE(p.ok()) << p.message();
  if (!p.ok()) return {};
  std::vector<std::string> out;
  for (std::string_view s : (*p)->split(text)) out.emplace_back(s);
  return out;
}

using Pieces = std::vector<std::string>;

TEST(PreTokenizer, Gpt2Pattern) {
  EXPECT_EQ(split("gpt-2", "Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("gpt-2", "a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(split("gpt-2", "I'm 12345!!"), (Pieces{"I", "'m", " 12345", "!!"}));
  EXPECT_EQ(split("gpt-2", "x \n"), (Pieces{"x", " \n"}));
  EXPECT_EQ(split("gpt-2", "DON'T"), (Pieces{"DON", "'", "T"}));  // GPT-2 is case-sensitive
}

TEST(PreTokenizer, Llama3Pattern) {
  EXPECT_EQ(split("llama-bpe", "Hello world 12345"), (Pieces{"Hello", " world", " ", "123", "45"}));
  EXPECT_EQ(split("llama-bpe", "DON'T stop"), (Pieces{"DON", "'T", " stop"}));
  EXPECT_EQ(split("llama-bpe", "a\n\n  b"), (Pieces{"a", "\n\n", " ", " b"}));
  EXPECT_EQ(split("llama-bpe", "(x)"), (Pieces{"(x", ")"}));
  EXPECT_EQ(split("llama-bpe", "日本語 テキスト"), (Pieces{"日本語", " テキスト"}));
}

TEST(PreTokenizer, Qwen2SplitsSingleDigits) {
  EXPECT_EQ(split("qwen2", "x 12345"), (Pieces{"x", " ", "1", "2", "3", "4", "5"}));
}

TEST(PreTokenizer, MalformedUtf8IsIsolated) {
  EXPECT_EQ(split("llama-bpe",
                  "ab\xFF\xFE"
                  "cd"),
            (Pieces{"ab", "\xFF\xFE", "cd"}));
  EXPECT_EQ(split("gpt-2", "\xE2\x82"), (Pieces{"\xE2\x82"}));
}

TEST(PreTokenizer, PiecesTileTheInput) {
  auto p = PreTokenizer::create("qwen2");
  ASSERT_TRUE(p.ok());
  std::mt19937 rng(7);
  for (int n = 0; n < 300; ++n) {
    std::string text;
    const auto len = rng() % 40;
    for (uint32_t i = 0; i < len; ++i) text += static_cast<char>(rng() % 256);
    std::string joined;
    for (std::string_view s : (*p)->split(text)) {
      EXPECT_FALSE(s.empty());
      joined += s;
    }
    EXPECT_EQ(joined, text) << escape(text);
  }
}

TEST(PreTokenizer, RejectsUnknownNamesAndBadPatterns) {
  EXPECT_FALSE(PreTokenizer::create("no-such-pre").ok());
  EXPECT_FALSE(PreTokenizer::from_pattern("(unclosed").ok());
}

}  // namespace
}  // namespace tangram::testing
