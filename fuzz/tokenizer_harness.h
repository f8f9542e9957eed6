// What the tokenizer harnesses (fuzz_tokenizer_spm, fuzz_tokenizer_bpe) share: loading a real
// vocabulary once, and one run over an input. The first input byte picks the flags (bit 0
// add_special, bit 1 parse_special, bit 2 skip_special); the rest is the text. The text is
// encoded (every id in the vocabulary), decoded, and decode(encode(x)) == x is checked where
// tokenizer.h promises it; then the text's bytes, read as ids valid or not (as a client's
// token-list prompt gives them), are decoded whole and streamed as the server streams them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "gguf/gguf_file.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace tangram::fuzz {

inline std::unique_ptr<Tokenizer> load_tokenizer(std::string_view shared_relative) {
  auto file = GgufFile::open(shared_file(shared_relative));
  TG_FUZZ_CHECK(file.ok());
  auto t = Tokenizer::from_gguf(**file);
  TG_FUZZ_CHECK(t.ok());
  return std::move(t).value();
}

// `round_trips(text)`: whether the vocabulary promises decode(encode(text)) == text (plain text,
// special tokens not parsed).
template <typename RoundTrips>
void fuzz_tokenizer(const Tokenizer& tok, const uint8_t* data, size_t size,
                    RoundTrips round_trips) {
  if (size < 1) return;
  const bool add_special = data[0] & 1;
  const bool parse_special = data[0] & 2;
  const bool skip_special = data[0] & 4;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  const std::vector<int32_t> ids = tok.encode(text, add_special, parse_special);
  for (int32_t id : ids) TG_FUZZ_CHECK(id >= 0 && id < tok.n_vocab());
  const std::string decoded = tok.decode(ids, skip_special);
  if (!add_special && !parse_special && round_trips(text)) TG_FUZZ_CHECK(decoded == text);

  std::vector<int32_t> raw;
  for (size_t i = 0; i + 4 <= text.size() && raw.size() < 64; i += 4) {
    int32_t id = 0;
    std::memcpy(&id, text.data() + i, sizeof id);
    raw.push_back(id % (tok.n_vocab() + 8));
  }
  (void)tok.decode(raw, skip_special);
  StreamDecoder stream(tok, skip_special);
  for (int32_t id : raw) {
    (void)tok.token_to_piece(id);
    (void)stream.push(id);
  }
  (void)stream.flush();
}

}  // namespace tangram::fuzz
