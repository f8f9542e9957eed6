// Tokenizer, the byte-level BPE vocabulary of Llama 3 (llama.cpp's llama-bpe vocab GGUF: 128k
// tokens, its pre-tokeniser regex, 256 special tokens): arbitrary bytes encoded with and without
// BOS/EOS and special-token parsing, every id decoded back, and decode(encode(x)) == x checked
// where tokenizer.h promises it (plain text, special tokens not parsed). The first input byte picks
// the flags; the rest is the text.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tokenizer_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto tok =
      tangram::fuzz::load_tokenizer("models/llama.cpp-vocab/ggml-vocab-llama-bpe.gguf");
  tangram::fuzz::fuzz_tokenizer(*tok, data, size, [](std::string_view) { return true; });
  return 0;
}
