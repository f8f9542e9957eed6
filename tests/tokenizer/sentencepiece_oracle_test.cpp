// Our SPM encoder on the Llama 2 tokenizer.model against libsentencepiece, the reference
// implementation. Llama 2's normalizer is "identity" with remove_extra_whitespaces off, so the
// oracle sees exactly the text we see, whitespace runs included.
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>

#include <random>

#include "support/test_support.h"
#include "tokenizer/sentencepiece_model.h"
#include "tokenizer_test_util.h"

namespace tangram::testing {
namespace {

const std::vector<std::string>& oracle_texts() {
  static const std::vector<std::string> texts = {
      // ASCII
      "Hello world! Once upon a time",
      "The quick brown fox jumps over the lazy dog.",
      "Hello, y'all! How are you?",
      "!!!???...,,;;::--__",
      "int main() { return 0; }",
      "<s> and </s> are plain text here",
      "<0x41> is not a byte token in text",
      "a",
      "I",
      // accents and other Latin
      "café naïve résumé Ångström façade",
      "Ünïcödé Łódź Þórr ŒUVRE",
      "ǅ ǈ ǋ ß ẞ",
      // CJK and other scripts
      "日本語のテキスト",
      "中文测试，你好世界。",
      "한국어 텍스트",
      "Привет, мир!",
      "مرحبا بالعالم",
      "שלום עולם",
      "नमस्ते दुनिया",
      "ภาษาไทย",
      "Ελληνικά κείμενα",
      "ᚠᛇᚻ᛫ᛒᛦᚦ",
      // emoji (astral planes, ZWJ sequences, variation selectors)
      "😀 emoji",
      "🚀🌍✨",
      "👨‍👩‍👧‍👦 family",
      "🏳️‍🌈 flag",
      "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math letters",
      // whitespace runs, tabs, newlines
      "a  b   c    d",
      "  leading spaces",
      "trailing spaces   ",
      " ",
      "   ",
      "\t\ttabs\t",
      "\t \n \r\n mixed",
      "line one\nline two\n\nline four\n",
      "\n",
      "\n\n\n",
      "\r\n",
      "word\u00a0nbsp",
      "zero\u200bwidth",
      "soft\u00adhyphen",
      "\u3000ideographic space",
      // digits
      "123 4567 89",
      "3.14159 1,000,000 -42 +7e10",
      "0000000000",
      "٠١٢٣ ४५६",
      // symbols and controls
      "∑∫√∞≠≤ ±×÷",
      "\x01\x02\x7f control",
      "▁ lower one eighth block",
      // mixed
      "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～",
      "ied 4 ½ months",
      "Führer",
      "   Hello\n    Hello",
  };
  return texts;
}

bool contains_space_mark(const std::string& text) {
  return text.find("\xE2\x96\x81") != std::string::npos;
}

class SentencePieceOracle : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto status = sp_.Load(data_file("models/llama2-tokenizer/tokenizer.model").string());
    ASSERT_TRUE(status.ok()) << status.ToString();
  }
  std::vector<int32_t> oracle_ids(const std::string& text) {
    std::vector<int> ids;
    EXPECT_TRUE(sp_.Encode(text, &ids).ok());
    return std::vector<int32_t>(ids.begin(), ids.end());
  }
  std::string oracle_decode(const std::vector<int32_t>& ids) {
    std::string out;
    EXPECT_TRUE(sp_.Decode(std::vector<int>(ids.begin(), ids.end()), &out).ok());
    return out;
  }
  sentencepiece::SentencePieceProcessor sp_;
};

TEST_F(SentencePieceOracle, ReadmeExample) {
  const std::vector<int32_t> expected = {15043, 3186, 29991, 9038, 2501, 263, 931};
  EXPECT_EQ(oracle_ids("Hello world! Once upon a time"), expected);
  EXPECT_EQ(llama2_sentencepiece_tokenizer().encode("Hello world! Once upon a time", false, false),
            expected);
}

TEST_F(SentencePieceOracle, EncodeAndDecodeMatchOnEveryKindOfText) {
  const Tokenizer& tok = llama2_sentencepiece_tokenizer();
  ASSERT_EQ(tok.n_vocab(), 32000);
  for (const std::string& text : oracle_texts()) {
    const std::vector<int32_t> expected = oracle_ids(text);
    const std::vector<int32_t> got = tok.encode(text, false, false);
    EXPECT_EQ(got, expected) << "text \"" << escape(text) << "\" expected "
                             << ids_to_string(expected) << " got " << ids_to_string(got);
    EXPECT_EQ(tok.decode(got, true), oracle_decode(expected)) << escape(text);
    // A literal "▁" in the input decodes as a space, in SentencePiece as here.
    if (!contains_space_mark(text)) {
      EXPECT_EQ(tok.decode(got, true), text) << escape(text);
    }
  }
}

// Pseudo-random mixtures of the hard parts (whitespace runs, multi-byte characters, digits),
// with a fixed seed so failures reproduce.
TEST_F(SentencePieceOracle, RandomMixturesMatch) {
  const Tokenizer& tok = llama2_sentencepiece_tokenizer();
  const std::vector<std::string> parts = {
      "a",  "b",     "the", "ing", " ", "  ",     "\n",  "\t", "é", "ñ",
      "日", "本",    "😀",   "🚀",   "1", "23",     "456", ".",  ",", "'s",
      "-",  "Hello", "▁",   "ж",   "ß", "\u00a0", "<",   ">",  "x", "0x",
  };
  std::mt19937 rng(1234);
  int mismatches = 0;
  for (int n = 0; n < 400; ++n) {
    std::string text;
    const auto len = static_cast<uint32_t>(1 + rng() % 16);
    for (uint32_t i = 0; i < len; ++i) text += parts[rng() % parts.size()];
    const std::vector<int32_t> expected = oracle_ids(text);
    const std::vector<int32_t> got = tok.encode(text, false, false);
    if (got != expected && ++mismatches <= 5) {
      ADD_FAILURE() << "text \"" << escape(text) << "\" expected " << ids_to_string(expected)
                    << " got " << ids_to_string(got);
    }
    if (!contains_space_mark(text)) {
      EXPECT_EQ(tok.decode(got, true), text) << escape(text);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_F(SentencePieceOracle, ParsedModelMatchesTheLlamaSpmGguf) {
  auto m = load_sentencepiece_model(data_file("models/llama2-tokenizer/tokenizer.model").string());
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->model_type, SentencePieceModelType::kBpe);
  EXPECT_TRUE(m->byte_fallback);
  EXPECT_EQ(m->normalizer_name, "identity");
  EXPECT_FALSE(m->remove_extra_whitespaces);
  const Vocab& gguf = gguf_tokenizer("llama-spm").vocab();
  const Vocab& v = m->vocab;
  EXPECT_EQ(v.tokens, gguf.tokens);
  EXPECT_EQ(v.scores, gguf.scores);
  EXPECT_EQ(v.types, gguf.types);
  EXPECT_EQ(v.bos, 1);
  EXPECT_EQ(v.eos, 2);
  EXPECT_EQ(v.unk, 0);
  EXPECT_EQ(v.pad, -1);
  EXPECT_TRUE(v.add_bos);
  EXPECT_TRUE(v.add_space_prefix);
  // The oracle agrees on the piece table itself.
  ASSERT_EQ(sp_.GetPieceSize(), v.n_tokens());
  for (int32_t id = 0; id < v.n_tokens(); id += 97) {
    EXPECT_EQ(sp_.IdToPiece(id), v.tokens[static_cast<size_t>(id)]);
    EXPECT_EQ(sp_.GetScore(id), v.scores[static_cast<size_t>(id)]);
  }
}

}  // namespace
}  // namespace tangram::testing
