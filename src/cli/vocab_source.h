// Loads a tokenizer vocabulary from whatever file a user points at: a GGUF (model or
// vocab-only), a SentencePiece tokenizer.model, or a tiktoken rank file (Llama 3, Qwen).
#pragma once

#include <string>

#include "common/result.h"
#include "tokenizer/vocab.h"

namespace tangram::cli {

// `flavor` (llama3 | qwen2) is required for tiktoken files whose family cannot be guessed from
// the vocabulary size (128000 ranks: llama3, 151643: qwen2).
Result<Vocab> load_vocab_file(const std::string& path, const std::string& flavor);

}  // namespace tangram::cli
