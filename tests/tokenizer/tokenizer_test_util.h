// Helpers for the tokenizer tests: llama.cpp's .inp/.out vector files and cached tokenizers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace tangram::testing {

struct VectorCase {
  std::string text;
  std::vector<int32_t> ids;
};

// Reads ggml-vocab-<name>.gguf.inp/.out: inputs separated by "\n__ggml_vocab_test__\n" (the
// file ends with that separator), one line of space-separated ids per input.
std::vector<VectorCase> load_llama_cpp_vectors(const std::string& name);

// Tokenizers built once per test binary (loading the big vocabularies takes a moment).
const Tokenizer& gguf_tokenizer(const std::string& name);  // ggml-vocab-<name>.gguf
const Tokenizer& llama3_tiktoken_tokenizer();
const Tokenizer& qwen_tiktoken_tokenizer();
const Tokenizer& llama2_sentencepiece_tokenizer();

std::string ids_to_string(const std::vector<int32_t>& ids);
// Printable form of text for failure messages (escapes control and non-ASCII bytes).
std::string escape(const std::string& text);

}  // namespace tangram::testing
