// The stories260K tok512 vocabulary: llama.cpp's ids for 18 strings (whitespace, digits, quotes,
// accents, CJK, emoji via byte fallback, empty), from the GGUF and from the SentencePiece model.
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>

#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "support/test_support.h"
#include "tokenizer/sentencepiece_model.h"
#include "tokenizer_test_util.h"

namespace tangram::testing {
namespace {

struct Tok512Case {
  std::string text;
  std::vector<int32_t> ids_sentencepiece;
  std::vector<int32_t> ids_llama_cpp;
};

std::vector<Tok512Case> load_cases() {
  const auto json = nlohmann::json::parse(
      read_file(data_file("models/stories260K/expected/tok512_tokenization.json")));
  std::vector<Tok512Case> cases;
  for (const auto& c : json.at("cases")) {
    cases.push_back({c.at("text").get<std::string>(), c.at("ids").get<std::vector<int32_t>>(),
                     c.at("ids_llama_cpp").get<std::vector<int32_t>>()});
  }
  return cases;
}

std::unique_ptr<Tokenizer> stories_tokenizer() {
  auto file = GgufFile::open(data_file("models/stories260K/stories260K.gguf").string());
  EXPECT_TRUE(file.ok()) << file.message();
  if (!file.ok()) return nullptr;
  auto tok = Tokenizer::from_gguf(**file);
  EXPECT_TRUE(tok.ok()) << tok.message();
  return tok.ok() ? std::move(tok.value()) : nullptr;
}

TEST(Stories260K, GgufVocabGivesLlamaCppIds) {
  const auto tok = stories_tokenizer();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->n_vocab(), 512);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_EQ(tok->pad(), -1);  // stored as 0xFFFFFFFF
  const auto cases = load_cases();
  ASSERT_EQ(cases.size(), 18u);
  for (const auto& c : cases) {
    const auto got = tok->encode(c.text, false, false);
    EXPECT_EQ(got, c.ids_llama_cpp) << escape(c.text) << " got " << ids_to_string(got);
    EXPECT_EQ(tok->decode(got, true), c.text) << escape(c.text);
    EXPECT_EQ(tok->encode(c.text, true, false).front(), 1) << "BOS";
  }
}

TEST(Stories260K, SentencePieceModelEqualsGgufVocab) {
  const auto tok = stories_tokenizer();
  ASSERT_NE(tok, nullptr);
  auto m = load_sentencepiece_model(data_file("models/stories260K/tok512.model").string());
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_TRUE(m->remove_extra_whitespaces);  // why SentencePiece differs on whitespace runs
  EXPECT_EQ(m->vocab.tokens, tok->vocab().tokens);
  EXPECT_EQ(m->vocab.scores, tok->vocab().scores);
  EXPECT_EQ(m->vocab.types, tok->vocab().types);
  auto from_model = Tokenizer::from_vocab(m->vocab);
  ASSERT_TRUE(from_model.ok()) << from_model.message();
  for (const auto& c : load_cases()) {
    EXPECT_EQ((*from_model)->encode(c.text, false, false), c.ids_llama_cpp) << escape(c.text);
  }
}

// Where SentencePiece's whitespace normalisation does not change the text, the live oracle,
// the recorded SentencePiece ids and our ids all agree.
TEST(Stories260K, AgreesWithLibSentencePieceWhereNormalizationIsMoot) {
  const auto tok = stories_tokenizer();
  ASSERT_NE(tok, nullptr);
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.Load(data_file("models/stories260K/tok512.model").string()).ok());
  int compared = 0;
  for (const auto& c : load_cases()) {
    std::vector<int> oracle;
    ASSERT_TRUE(sp.Encode(c.text, &oracle).ok());
    EXPECT_EQ(std::vector<int32_t>(oracle.begin(), oracle.end()), c.ids_sentencepiece)
        << escape(c.text);
    if (c.ids_sentencepiece != c.ids_llama_cpp) continue;  // leading/trailing/repeated spaces
    ++compared;
    EXPECT_EQ(tok->encode(c.text, false, false), c.ids_sentencepiece) << escape(c.text);
  }
  EXPECT_EQ(compared, 14);
}

}  // namespace
}  // namespace tangram::testing
