// Builds a Vocab from a SentencePiece `tokenizer.model` (a serialized ModelProto), read with a
// small protobuf wire-format parser: pieces (text, score, type), trainer_spec (model type, special
// ids, byte fallback) and normalizer_spec (dummy prefix, whitespace handling).
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"
#include "tokenizer/vocab.h"

namespace tangram {

enum class SentencePieceModelType { kUnigram = 1, kBpe = 2, kWord = 3, kChar = 4 };

struct SentencePieceModel {
  // model "llama", pre "default"; bos/eos/unk/pad from trainer_spec (-1 when out of range);
  // add_bos true, add_space_prefix = normalizer add_dummy_prefix. Unigram models are encoded the
  // way llama.cpp encodes every "llama" vocabulary (score-ordered merges), which can differ from
  // SentencePiece's Viterbi segmentation.
  Vocab vocab;
  SentencePieceModelType model_type = SentencePieceModelType::kUnigram;
  bool byte_fallback = false;
  std::string normalizer_name;           // e.g. "identity", "nmt_nfkc"
  bool remove_extra_whitespaces = true;  // SentencePiece collapses whitespace runs when set
};

// Parses the bytes of a ModelProto.
Result<SentencePieceModel> parse_sentencepiece_model(std::string_view bytes);
// Reads and parses a tokenizer.model file.
Result<SentencePieceModel> load_sentencepiece_model(const std::string& path);

}  // namespace tangram
