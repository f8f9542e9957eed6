// Tokenizer, the SentencePiece BPE vocabulary of stories260K (512 tokens, byte fallback,
// add_space_prefix): arbitrary bytes encoded with and without BOS/EOS and special-token parsing,
// every id decoded back, and decode(encode(x)) == x checked where tokenizer.h promises it (plain
// text without U+2581, special tokens not parsed). The first input byte picks the flags; the rest
// is the text.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tokenizer_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto tok = tangram::fuzz::load_tokenizer("models/stories260K/stories260K.gguf");
  tangram::fuzz::fuzz_tokenizer(*tok, data, size, [](std::string_view text) {
    // SPM spells the space U+2581 ("▁") and decodes a literal one as a space (tokenizer.h).
    return text.find("\xe2\x96\x81") == std::string_view::npos;
  });
  return 0;
}
