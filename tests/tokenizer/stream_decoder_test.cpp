// StreamDecoder: multi-byte characters split across tokens are held back until complete, and the
// output is always well-formed UTF-8.
#include <gtest/gtest.h>

#include "tokenizer/stream_decoder.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace tangram::testing {
namespace {

const std::vector<std::string> kTexts = {
    "Hello world",
    "café naïve",
    "日本語のテキスト",
    "😀 emoji 🚀🌍",
    "👨‍👩‍👧‍👦",
    "Cửa Việt",
    "€100 ☃",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "line\nbreak\ttab",
    "Привет мир",
};

// Streams every token of `text`, checking each chunk is valid UTF-8; returns the joined text.
std::string stream_all(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  StreamDecoder dec(tok);
  std::string out;
  for (int32_t id : ids) {
    const std::string chunk = dec.push(id);
    EXPECT_TRUE(utf8_is_valid(chunk)) << escape(chunk);
    out += chunk;
  }
  const std::string tail = dec.flush();
  EXPECT_TRUE(tail.empty()) << escape(tail);
  return out;
}

TEST(StreamDecoder, SpmByteFallbackEmojiIsHeldUntilComplete) {
  const Tokenizer& tok = gguf_tokenizer("llama-spm");
  // "😀" has no piece of its own: "▁" then the four byte tokens <0xF0> <0x9F> <0x98> <0x80>.
  const std::vector<int32_t> ids = tok.encode("😀", false, false);
  ASSERT_EQ(ids, (std::vector<int32_t>{29871, 243, 162, 155, 131}));
  StreamDecoder dec(tok);
  EXPECT_EQ(dec.push(ids[0]), " ");
  EXPECT_EQ(dec.push(ids[1]), "");
  EXPECT_EQ(dec.push(ids[2]), "");
  EXPECT_EQ(dec.push(ids[3]), "");
  EXPECT_EQ(dec.pending(), 3u);
  EXPECT_EQ(dec.push(ids[4]), "😀");
  EXPECT_EQ(dec.flush(), "");
}

TEST(StreamDecoder, ReassemblesEveryVocabulary) {
  for (const char* name : {"llama-spm", "phi-3", "gpt-2", "llama-bpe", "qwen2"}) {
    const Tokenizer& tok = gguf_tokenizer(name);
    const bool spm = tok.vocab().model == VocabModel::kSpm;
    for (const std::string& text : kTexts) {
      // SPM streams keep the dummy-prefix space; decode() removes it.
      EXPECT_EQ(stream_all(tok, tok.encode(text, false, false)), spm ? " " + text : text)
          << name << " " << text;
    }
  }
}

TEST(StreamDecoder, EverySplitPointOfRawBytes) {
  const Tokenizer& tok = gguf_tokenizer("llama-spm");
  const std::string text = "a€😀ж日b";
  for (size_t cut1 = 0; cut1 <= text.size(); ++cut1) {
    for (size_t cut2 = cut1; cut2 <= text.size(); ++cut2) {
      StreamDecoder dec(tok);
      std::string out = dec.push_bytes(text.substr(0, cut1));
      out += dec.push_bytes(text.substr(cut1, cut2 - cut1));
      out += dec.push_bytes(text.substr(cut2));
      out += dec.flush();
      EXPECT_EQ(out, text) << cut1 << " " << cut2;
    }
  }
}

TEST(StreamDecoder, BrokenSequencesBecomeReplacementCharacters) {
  const Tokenizer& tok = gguf_tokenizer("llama-spm");
  const std::string fffd(kUtf8Replacement);
  StreamDecoder dec(tok);
  EXPECT_EQ(dec.push_bytes("\xE2\x82"), "");
  EXPECT_EQ(dec.push_bytes("\xAC"), "€");
  EXPECT_EQ(dec.push_bytes("\xE2"
                           "A"),
            fffd + "A");                                          // cut short by ASCII
  EXPECT_EQ(dec.push_bytes("\xFF"), fffd);                        // never valid
  EXPECT_EQ(dec.push_bytes("\xC0\xAF"), fffd + fffd);             // overlong
  EXPECT_EQ(dec.push_bytes("\xED\xA0\x80"), fffd + fffd + fffd);  // surrogate
  EXPECT_EQ(dec.push_bytes("\xF0\x9F"), "");
  EXPECT_EQ(dec.flush(), fffd);  // dangling at the end
  EXPECT_EQ(dec.pending(), 0u);
  EXPECT_EQ(dec.flush(), "");
}

TEST(StreamDecoder, SkipsControlTokensUnlessAsked) {
  const Tokenizer& tok = gguf_tokenizer("qwen2");
  StreamDecoder skip(tok);
  EXPECT_EQ(skip.push(151645), "");
  StreamDecoder keep(tok, /*skip_special=*/false);
  EXPECT_EQ(keep.push(151645), "<|im_end|>");
  EXPECT_EQ(skip.push(-1), "");
  EXPECT_EQ(skip.push(1 << 30), "");
}

TEST(Utf8, DecodeClassifiesSequences) {
  const auto status = [](std::string_view s) { return utf8_decode(s, 0).status; };
  EXPECT_EQ(status("A"), Utf8Status::kComplete);
  EXPECT_EQ(utf8_decode("\xF0\x9F\x98\x80", 0).codepoint, 0x1F600u);
  EXPECT_EQ(utf8_decode("\xF0\x9F\x98\x80", 0).length, 4u);
  EXPECT_EQ(status("\xF0\x9F\x98"), Utf8Status::kIncomplete);
  EXPECT_EQ(status("\xC3"), Utf8Status::kIncomplete);
  EXPECT_EQ(status("\x80"), Utf8Status::kInvalid);
  EXPECT_EQ(status("\xC1\xBF"), Utf8Status::kInvalid);          // overlong
  EXPECT_EQ(status("\xE0\x80\x80"), Utf8Status::kInvalid);      // overlong
  EXPECT_EQ(status("\xED\xA0\x80"), Utf8Status::kInvalid);      // surrogate
  EXPECT_EQ(status("\xF4\x90\x80\x80"), Utf8Status::kInvalid);  // > U+10FFFF
  EXPECT_EQ(status("\xF5\x80\x80\x80"), Utf8Status::kInvalid);
  EXPECT_EQ(status("\xE2\x82"
                   "A"),
            Utf8Status::kInvalid);
  std::string s;
  for (uint32_t cp : {0x41u, 0xE9u, 0x20ACu, 0x1F600u}) utf8_append(s, cp);
  EXPECT_EQ(s, "Aé€😀");
  EXPECT_TRUE(utf8_is_valid(s));
  EXPECT_FALSE(utf8_is_valid("a\xFF"));
}

}  // namespace
}  // namespace tangram::testing
