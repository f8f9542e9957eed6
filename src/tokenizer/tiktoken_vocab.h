// Builds a byte-level BPE Vocab from a tiktoken rank file (one "base64(token bytes) rank" per
// line), the format of Llama 3's tokenizer.model and Qwen's qwen.tiktoken. Token texts use the
// GPT-2 byte-level alphabet; merges are derived from the ranks the way Hugging Face converts
// tiktoken to BPE; the model family's special tokens are appended after the ordinary ranks.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"
#include "tokenizer/vocab.h"

namespace tangram {

enum class TiktokenFlavor {
  // pre "llama-bpe"; specials 128000..128255 as in Llama 3.1: <|begin_of_text|> (BOS),
  // <|end_of_text|> (EOS), <|finetune_right_pad_id|>, <|start_header_id|>, <|end_header_id|>,
  // <|eom_id|> (EOM), <|eot_id|> (EOT), <|python_tag|>, the rest <|reserved_special_token_N|>.
  // add_bos.
  kLlama3,
  // pre "qwen2"; specials from 151643 as in Qwen2.5: <|endoftext|> (BOS, PAD), <|im_start|>,
  // <|im_end|> (EOS, EOT), <|object_ref_start|> ... <|file_sep|> (22 in all; <tool_call> and
  // </tool_call> are USER_DEFINED, the others CONTROL). No add_bos.
  kQwen2,
};

// Parses the text of a rank file. Ranks must be 0..n-1, each once.
Result<Vocab> vocab_from_tiktoken(std::string_view text, TiktokenFlavor flavor);
Result<Vocab> load_tiktoken_vocab(const std::string& path, TiktokenFlavor flavor);

// Merges ("left right", byte-level text, best first) for rank-ordered tokens given as raw bytes:
// for each token, every split into two tokens, ordered by the token's rank, then by the left
// and right parts' ranks.
std::vector<std::string> merges_from_ranks(const std::vector<std::string>& ranked_tokens);

}  // namespace tangram
