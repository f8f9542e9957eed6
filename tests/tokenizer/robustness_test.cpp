// Hostile input never crashes: truncated and corrupted SentencePiece models, random bytes
// through every encoder. (Run under -DTANGRAM_SANITIZE=ON to check memory safety as well.)
#include <gtest/gtest.h>

#include <random>

#include "support/test_support.h"
#include "tokenizer/protobuf_reader.h"
#include "tokenizer/sentencepiece_model.h"
#include "tokenizer_test_util.h"

namespace tangram::testing {
namespace {

TEST(Robustness, TruncatedSentencePieceModels) {
  const std::string bytes = read_file(data_file("models/stories260K/tok512.model"));
  ASSERT_GT(bytes.size(), 1000u);
  ASSERT_TRUE(parse_sentencepiece_model(bytes).ok());
  int failures = 0;
  for (size_t n = 0; n < bytes.size(); n += 7) {
    auto m = parse_sentencepiece_model(std::string_view(bytes).substr(0, n));
    if (!m.ok()) ++failures;
  }
  EXPECT_GT(failures, 0);  // most prefixes cut a field short
}

TEST(Robustness, CorruptedSentencePieceModels) {
  const std::string bytes = read_file(data_file("models/stories260K/tok512.model"));
  std::mt19937 rng(42);
  for (int n = 0; n < 300; ++n) {
    std::string corrupt = bytes;
    for (int k = 0; k < 4; ++k) corrupt[rng() % corrupt.size()] = static_cast<char>(rng() % 256);
    auto m = parse_sentencepiece_model(corrupt);
    if (!m.ok()) continue;
    // Whatever parsed must be usable.
    auto tok = Tokenizer::from_vocab(std::move(m.value().vocab));
    if (tok.ok()) (void)(*tok)->encode("Once upon a time", true, true);
  }
  EXPECT_FALSE(parse_sentencepiece_model("").ok());
  EXPECT_FALSE(parse_sentencepiece_model("\x0a\xff\xff\xff\xff\x0f").ok());  // length overruns
  EXPECT_FALSE(load_sentencepiece_model("/nonexistent/tokenizer.model").ok());
}

TEST(Robustness, ProtoReaderFieldsAndErrors) {
  // field 1 varint 150; field 2 bytes "hi"; field 3 fixed32; field 4 fixed64
  const std::string msg(
      "\x08\x96\x01\x12\x02hi\x1d\x01\x02\x03\x04\x21\x01\x00\x00\x00\x00\x00\x00\x00", 21);
  ProtoReader r(msg);
  auto f1 = r.next();
  ASSERT_TRUE(f1.ok());
  EXPECT_EQ(f1->number, 1u);
  EXPECT_EQ(f1->varint, 150u);
  auto f2 = r.next();
  ASSERT_TRUE(f2.ok());
  EXPECT_EQ(f2->bytes, "hi");
  auto f3 = r.next();
  ASSERT_TRUE(f3.ok());
  EXPECT_EQ(f3->varint, 0x04030201u);
  auto f4 = r.next();
  ASSERT_TRUE(f4.ok());
  EXPECT_EQ(f4->varint, 1u);
  EXPECT_TRUE(r.done());
  EXPECT_FALSE(ProtoReader("\x08").next().ok());          // varint missing
  EXPECT_FALSE(ProtoReader("\x0b").next().ok());          // group (wire type 3)
  EXPECT_FALSE(ProtoReader("\x0d\x01\x02").next().ok());  // fixed32 truncated
  EXPECT_FALSE(ProtoReader("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01").next().ok());
}

TEST(Robustness, RandomBytesThroughEveryEncoder) {
  std::mt19937 rng(5);
  for (const char* name : {"llama-spm", "phi-3", "gpt-2", "llama-bpe", "qwen2"}) {
    const Tokenizer& tok = gguf_tokenizer(name);
    for (int n = 0; n < 100; ++n) {
      std::string text;
      const auto len = rng() % 64;
      for (uint32_t i = 0; i < len; ++i) text += static_cast<char>(rng() % 256);
      const auto ids = tok.encode(text, true, true);
      for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.n_vocab()) << name;
      (void)tok.decode(ids, false);
    }
  }
}

}  // namespace
}  // namespace tangram::testing
