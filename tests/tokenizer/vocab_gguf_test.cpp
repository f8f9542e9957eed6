// Vocab <-> GGUF: a vocabulary written with GgufWriter reads back identically and tokenizes the
// same; malformed tokenizer metadata is reported as an error.
#include <gtest/gtest.h>

#include "gguf/gguf_file.h"
#include "support/test_support.h"
#include "tokenizer/sentencepiece_model.h"
#include "tokenizer/tiktoken_vocab.h"
#include "tokenizer_test_util.h"

namespace tangram::testing {
namespace {

Result<Vocab> write_and_read(const Vocab& v, const std::string& name) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  vocab_to_gguf(v, w);
  const std::string path = (temp_dir() / name).string();
  TG_TRY(w.write(path));
  TG_ASSIGN(auto file, GgufFile::open(path));
  return vocab_from_gguf(*file);
}

void expect_same_vocab(const Vocab& a, const Vocab& b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.pre, b.pre);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.scores, b.scores);
  EXPECT_EQ(a.types, b.types);
  EXPECT_EQ(a.merges, b.merges);
  EXPECT_EQ(a.bos, b.bos);
  EXPECT_EQ(a.eos, b.eos);
  EXPECT_EQ(a.eot, b.eot);
  EXPECT_EQ(a.eom, b.eom);
  EXPECT_EQ(a.unk, b.unk);
  EXPECT_EQ(a.pad, b.pad);
  EXPECT_EQ(a.add_bos, b.add_bos);
  EXPECT_EQ(a.add_eos, b.add_eos);
  EXPECT_EQ(a.add_space_prefix, b.add_space_prefix);
  EXPECT_EQ(a.chat_template, b.chat_template);
}

TEST(VocabGguf, SentencePieceVocabRoundTrips) {
  auto m = load_sentencepiece_model(data_file("models/llama2-tokenizer/tokenizer.model").string());
  ASSERT_TRUE(m.ok()) << m.message();
  m->vocab.chat_template = "{{ messages }}";
  auto back = write_and_read(m->vocab, "spm.gguf");
  ASSERT_TRUE(back.ok()) << back.message();
  expect_same_vocab(m->vocab, *back);
  auto tok = Tokenizer::from_vocab(std::move(back.value()));
  ASSERT_TRUE(tok.ok()) << tok.message();
  EXPECT_EQ((*tok)->chat_template(), "{{ messages }}");
  for (const VectorCase& c : load_llama_cpp_vectors("llama-spm")) {
    EXPECT_EQ((*tok)->encode(c.text, false, false), c.ids) << escape(c.text);
  }
}

TEST(VocabGguf, TiktokenVocabRoundTrips) {
  // Qwen's ordinary ranks are the first 151643 tokens of the qwen2 GGUF; a slice of them keeps
  // this test quick while exercising merges, specials and padding.
  const Vocab& full = qwen_tiktoken_tokenizer().vocab();
  std::string rank_file;
  for (int32_t id = 0; id < 5000; ++id) {
    const std::string bytes = qwen_tiktoken_tokenizer().token_to_piece(id);
    static const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string enc;
    uint32_t acc = 0;
    int bits = 0;
    for (char c : bytes) {
      acc = (acc << 8) | static_cast<uint8_t>(c);
      bits += 8;
      while (bits >= 6) {
        bits -= 6;
        enc += b64[(acc >> bits) & 63];
      }
    }
    if (bits > 0) enc += b64[(acc << (6 - bits)) & 63];
    while (enc.size() % 4 != 0) enc += '=';
    rank_file += enc + " " + std::to_string(id) + "\n";
  }
  auto v = vocab_from_tiktoken(rank_file, TiktokenFlavor::kQwen2);
  ASSERT_TRUE(v.ok()) << v.message();
  for (int32_t id = 0; id < 5000; ++id) {
    ASSERT_EQ(v->tokens[static_cast<size_t>(id)], full.tokens[static_cast<size_t>(id)]);
  }
  pad_vocab(*v, 5100);
  EXPECT_EQ(v->n_tokens(), 5100);
  EXPECT_EQ(v->tokens.back(), "[PAD5099]");
  auto back = write_and_read(*v, "bpe.gguf");
  ASSERT_TRUE(back.ok()) << back.message();
  expect_same_vocab(*v, *back);
  auto a = Tokenizer::from_vocab(*v);
  auto b = Tokenizer::from_vocab(std::move(back.value()));
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string text = "Hello world, this is a test of 12345 tokens!\n<|im_start|>";
  EXPECT_EQ((*a)->encode(text, false, true), (*b)->encode(text, false, true));
  EXPECT_EQ((*b)->decode((*b)->encode(text, false, true), false), text);
}

TEST(VocabGguf, MalformedMetadataIsAnError) {
  const auto read = [](GgufWriter& w, const std::string& name) -> Result<Vocab> {
    const std::string path = (temp_dir() / name).string();
    TG_TRY(w.write(path));
    TG_ASSIGN(auto file, GgufFile::open(path));
    return vocab_from_gguf(*file);
  };
  {
    GgufWriter w;  // no tokenizer at all
    w.set_string("general.architecture", "llama");
    EXPECT_FALSE(read(w, "none.gguf").ok());
  }
  {
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "bert");
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
    EXPECT_FALSE(read(w, "model.gguf").ok());
  }
  {
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
    w.set_f32_array("tokenizer.ggml.scores", {0.0f});  // wrong length
    EXPECT_FALSE(read(w, "scores.gguf").ok());
  }
  {
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
    w.set_string_array("tokenizer.ggml.token_type", {"x", "y"});  // wrong element type
    EXPECT_FALSE(read(w, "types.gguf").ok());
  }
  {
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
    w.set_i32_array("tokenizer.ggml.token_type", {1, 42});  // unknown type
    EXPECT_FALSE(read(w, "type42.gguf").ok());
  }
  {
    GgufWriter w;  // special ids outside the vocabulary mean "none", as in llama.cpp
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
    w.set_u32("tokenizer.ggml.bos_token_id", 7);
    w.set_u32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);
    auto v = read(w, "ids.gguf");
    ASSERT_TRUE(v.ok()) << v.message();
    EXPECT_EQ(v->bos, -1);
    EXPECT_EQ(v->pad, -1);
  }
  {
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", "no-such-pre");
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "ab"});
    w.set_string_array("tokenizer.ggml.merges", {"a b"});
    auto v = read(w, "pre.gguf");
    ASSERT_TRUE(v.ok()) << v.message();
    EXPECT_FALSE(Tokenizer::from_vocab(std::move(v.value())).ok());  // unknown pre-tokenizer
  }
}

TEST(VocabGguf, FromVocabValidates) {
  Vocab empty;
  EXPECT_FALSE(Tokenizer::from_vocab(empty).ok());
  Vocab v;
  v.tokens = {"a", "b"};
  v.scores = {0.0f};
  EXPECT_FALSE(Tokenizer::from_vocab(v).ok());
  v.scores.clear();
  v.eos = 2;
  EXPECT_FALSE(Tokenizer::from_vocab(v).ok());
  v.eos = 1;
  v.model = VocabModel::kBpe;
  v.merges = {"nospace"};
  EXPECT_FALSE(Tokenizer::from_vocab(v).ok());
  v.merges = {"a b"};  // result "ab" is not a token: the merge is ignored
  auto t = Tokenizer::from_vocab(v);
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ((*t)->encode("ab", false, false), (std::vector<int32_t>{0, 1}));
}

}  // namespace
}  // namespace tangram::testing
