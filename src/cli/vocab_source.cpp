#include "cli/vocab_source.h"

#include <fstream>
#include <sstream>

#include "gguf/gguf_file.h"
#include "tokenizer/sentencepiece_model.h"
#include "tokenizer/tiktoken_vocab.h"

namespace tangram::cli {

Result<Vocab> load_vocab_file(const std::string& path, const std::string& flavor) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("{}: cannot open the file", path);
  char magic[4] = {};
  in.read(magic, 4);
  if (in.gcount() == 4 && std::string(magic, 4) == "GGUF") {
    TG_ASSIGN(auto file, GgufFile::open(path));
    return vocab_from_gguf(*file);
  }
  // A SentencePiece ModelProto starts with field 1 (pieces), wire type 2: byte 0x0A.
  if (in.gcount() >= 1 && magic[0] == '\x0a') {
    TG_ASSIGN(auto spm, load_sentencepiece_model(path));
    return std::move(spm.vocab);
  }
  in.seekg(0);
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  TiktokenFlavor f;
  if (flavor == "llama3") {
    f = TiktokenFlavor::kLlama3;
  } else if (flavor == "qwen2" || flavor == "qwen") {
    f = TiktokenFlavor::kQwen2;
  } else if (flavor.empty()) {
    size_t lines = 0;
    for (char c : text) lines += c == '\n';
    if (lines == 128000)
      f = TiktokenFlavor::kLlama3;
    else if (lines == 151643)
      f = TiktokenFlavor::kQwen2;
    else
      return make_error(
          "{}: looks like a tiktoken rank file with {} ranks; say which family it is with --flavor "
          "llama3|qwen2",
          path, lines);
  } else {
    return make_error("unknown tokenizer flavour '{}': use llama3 or qwen2", flavor);
  }
  return vocab_from_tiktoken(text, f);
}

}  // namespace tangram::cli
