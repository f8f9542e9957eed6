#include "tokenizer/stream_decoder.h"

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace tangram {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string StreamDecoder::push(int32_t id) {
  const TokenType type = tokenizer_.token_type(id);
  if (skip_special_ && (type == TokenType::kControl || type == TokenType::kUnknown)) return {};
  return push_bytes(tokenizer_.token_to_piece(id));
}

std::string StreamDecoder::push_bytes(std::string_view bytes) {
  std::string buf = std::move(pending_);
  pending_.clear();
  buf.append(bytes);
  std::string out;
  out.reserve(buf.size());
  for (size_t pos = 0; pos < buf.size();) {
    const Utf8Char c = utf8_decode(buf, pos);
    switch (c.status) {
      case Utf8Status::kComplete:
        out.append(buf, pos, c.length);
        pos += c.length;
        break;
      case Utf8Status::kIncomplete:
        // Only the tail of the buffer can be incomplete: keep it for the next token.
        pending_.assign(buf, pos, std::string::npos);
        pos = buf.size();
        break;
      case Utf8Status::kInvalid:
        out += kUtf8Replacement;
        pos += 1;
        break;
    }
  }
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  if (!pending_.empty()) out = std::string(kUtf8Replacement);
  pending_.clear();
  return out;
}

}  // namespace tangram
