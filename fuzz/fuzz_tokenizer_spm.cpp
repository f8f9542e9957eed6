// Tokenizer, the SentencePiece BPE vocabulary of stories260K (512 tokens, byte fallback, add_space_prefix):
// arbitrary bytes encoded with and without BOS/EOS and special-token parsing, every id decoded
// back, and decode(encode(x)) == x checked where tokenizer.h promises it (plain text without
// U+2581, special tokens not parsed). The first input byte picks the flags; the rest is the text.
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

using namespace tangram;

namespace {

const Tokenizer& tokenizer() {
  static const std::unique_ptr<Tokenizer> tok = [] {
    auto file = GgufFile::open(fuzz::shared_file("models/stories260K/stories260K.gguf"));
    TG_FUZZ_CHECK(file.ok());
    auto t = Tokenizer::from_gguf(**file);
    TG_FUZZ_CHECK(t.ok());
    return std::move(t).value();
  }();
  return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Tokenizer& tok = tokenizer();
  if (size < 1) return 0;
  const bool add_special = data[0] & 1;
  const bool parse_special = data[0] & 2;
  const bool skip_special = data[0] & 4;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  const std::vector<int32_t> ids = tok.encode(text, add_special, parse_special);
  for (int32_t id : ids) TG_FUZZ_CHECK(id >= 0 && id < tok.n_vocab());
  const std::string decoded = tok.decode(ids, skip_special);
  // SPM spells the space "▁" and decodes a literal one as a space (tokenizer.h).
  if (!add_special && !parse_special && text.find("\xe2\x96\x81") == std::string_view::npos)
    TG_FUZZ_CHECK(decoded == text);

  // Ids from the input itself, valid or not, as a client's token-list prompt gives them.
  std::vector<int32_t> raw;
  for (size_t i = 0; i + 4 <= text.size() && raw.size() < 64; i += 4) {
    int32_t id = 0;
    std::memcpy(&id, text.data() + i, sizeof id);
    raw.push_back(id % (tok.n_vocab() + 8));
  }
  (void)tok.decode(raw, skip_special);

  // The server streams generated ids through a StreamDecoder.
  StreamDecoder stream(tok, skip_special);
  for (int32_t id : raw) {
    (void)tok.token_to_piece(id);
    (void)stream.push(id);
  }
  (void)stream.flush();
  return 0;
}
