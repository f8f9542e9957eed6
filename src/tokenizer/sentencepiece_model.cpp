#include "tokenizer/sentencepiece_model.h"

#include <bit>

#include "common/file_text.h"
#include "tokenizer/protobuf_reader.h"

namespace tangram {

namespace {

// Field numbers from SentencePiece's sentencepiece_model.proto.
namespace model_proto {
constexpr uint32_t kPieces = 1;
constexpr uint32_t kTrainerSpec = 2;
constexpr uint32_t kNormalizerSpec = 3;
}  // namespace model_proto
namespace piece_proto {
constexpr uint32_t kPiece = 1;
constexpr uint32_t kScore = 2;
constexpr uint32_t kType = 3;
}  // namespace piece_proto
namespace trainer_proto {
constexpr uint32_t kModelType = 3;
constexpr uint32_t kByteFallback = 35;
constexpr uint32_t kUnkId = 40;
constexpr uint32_t kBosId = 41;
constexpr uint32_t kEosId = 42;
constexpr uint32_t kPadId = 43;
}  // namespace trainer_proto
namespace normalizer_proto {
constexpr uint32_t kName = 1;
constexpr uint32_t kAddDummyPrefix = 3;
constexpr uint32_t kRemoveExtraWhitespaces = 4;
}  // namespace normalizer_proto

struct TrainerSpec {
  int64_t model_type = 1;  // proto default UNIGRAM
  bool byte_fallback = false;
  int32_t unk_id = 0;  // proto defaults
  int32_t bos_id = 1;
  int32_t eos_id = 2;
  int32_t pad_id = -1;
};

Status expect_wire(const ProtoField& f, WireType w, std::string_view what) {
  if (f.wire != w)
    return make_error("sentencepiece: field {} ({}) has the wrong wire type", f.number, what);
  return {};
}

// int32 fields are varints of the sign-extended 64-bit value; the low 32 bits are the number.
int32_t as_int32(uint64_t v) {
  return static_cast<int32_t>(static_cast<uint32_t>(v & 0xFFFFFFFFu));
}

Status parse_piece(std::string_view bytes, Vocab& v) {
  ProtoReader r(bytes);
  std::string text;
  float score = 0;
  int64_t type = 1;  // proto default NORMAL
  while (!r.done()) {
    TG_ASSIGN(const ProtoField f, r.next());
    if (f.number == piece_proto::kPiece) {
      TG_TRY(expect_wire(f, WireType::kLengthDelimited, "piece"));
      text = std::string(f.bytes);
    } else if (f.number == piece_proto::kScore) {
      TG_TRY(expect_wire(f, WireType::kFixed32, "score"));
      score = std::bit_cast<float>(static_cast<uint32_t>(f.varint));
    } else if (f.number == piece_proto::kType) {
      TG_TRY(expect_wire(f, WireType::kVarint, "type"));
      type = static_cast<int64_t>(f.varint);
    }
  }
  if (type < 1 || type > 6) {
    return make_error("sentencepiece: piece {} ('{}') has unknown type {}", v.tokens.size(), text,
                      type);
  }
  v.tokens.push_back(std::move(text));
  v.scores.push_back(score);
  v.types.push_back(static_cast<TokenType>(type));
  return {};
}

Status parse_trainer_spec(std::string_view bytes, TrainerSpec& t) {
  ProtoReader r(bytes);
  while (!r.done()) {
    TG_ASSIGN(const ProtoField f, r.next());
    if (f.wire != WireType::kVarint) continue;  // strings and repeated fields we do not need
    switch (f.number) {
      case trainer_proto::kModelType:
        t.model_type = static_cast<int64_t>(f.varint);
        break;
      case trainer_proto::kByteFallback:
        t.byte_fallback = f.varint != 0;
        break;
      case trainer_proto::kUnkId:
        t.unk_id = as_int32(f.varint);
        break;
      case trainer_proto::kBosId:
        t.bos_id = as_int32(f.varint);
        break;
      case trainer_proto::kEosId:
        t.eos_id = as_int32(f.varint);
        break;
      case trainer_proto::kPadId:
        t.pad_id = as_int32(f.varint);
        break;
      default:
        break;
    }
  }
  return {};
}

Status parse_normalizer_spec(std::string_view bytes, SentencePieceModel& m) {
  ProtoReader r(bytes);
  while (!r.done()) {
    TG_ASSIGN(const ProtoField f, r.next());
    if (f.number == normalizer_proto::kName && f.wire == WireType::kLengthDelimited) {
      m.normalizer_name = std::string(f.bytes);
    } else if (f.number == normalizer_proto::kAddDummyPrefix && f.wire == WireType::kVarint) {
      m.vocab.add_space_prefix = f.varint != 0;
    } else if (f.number == normalizer_proto::kRemoveExtraWhitespaces &&
               f.wire == WireType::kVarint) {
      m.remove_extra_whitespaces = f.varint != 0;
    }
  }
  return {};
}

}  // namespace

Result<SentencePieceModel> parse_sentencepiece_model(std::string_view bytes) {
  SentencePieceModel m;
  m.vocab.model = VocabModel::kSpm;
  m.vocab.pre = "default";
  m.vocab.add_space_prefix = true;  // proto default of add_dummy_prefix
  TrainerSpec trainer;
  ProtoReader r(bytes);
  while (!r.done()) {
    TG_ASSIGN(const ProtoField f, r.next());
    if (f.wire != WireType::kLengthDelimited) continue;
    if (f.number == model_proto::kPieces) {
      TG_TRY(parse_piece(f.bytes, m.vocab));
    } else if (f.number == model_proto::kTrainerSpec) {
      TG_TRY(parse_trainer_spec(f.bytes, trainer));
    } else if (f.number == model_proto::kNormalizerSpec) {
      TG_TRY(parse_normalizer_spec(f.bytes, m));
    }
  }
  if (m.vocab.tokens.empty()) return make_error("sentencepiece: the model has no pieces");
  if (trainer.model_type < 1 || trainer.model_type > 4) {
    return make_error("sentencepiece: unknown model type {}", trainer.model_type);
  }
  m.model_type = static_cast<SentencePieceModelType>(trainer.model_type);
  m.byte_fallback = trainer.byte_fallback;
  const auto id_or_none = [&m](int32_t id) { return id >= 0 && id < m.vocab.n_tokens() ? id : -1; };
  m.vocab.unk = id_or_none(trainer.unk_id);
  m.vocab.bos = id_or_none(trainer.bos_id);
  m.vocab.eos = id_or_none(trainer.eos_id);
  m.vocab.pad = id_or_none(trainer.pad_id);
  m.vocab.add_bos = m.vocab.bos >= 0;
  m.vocab.add_eos = false;
  TG_TRY(validate_vocab(m.vocab));
  return m;
}

Result<SentencePieceModel> load_sentencepiece_model(const std::string& path) {
  TG_ASSIGN(const std::string bytes, read_file_text(path, "the sentencepiece model"));
  auto m = parse_sentencepiece_model(bytes);
  if (!m.ok()) return make_error("{} ({})", m.message(), path);
  return m;
}

}  // namespace tangram
