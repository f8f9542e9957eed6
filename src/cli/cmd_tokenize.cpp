// `tangram tokenize`: text → token ids (and pieces) with a model's or a file's tokenizer.
#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/vocab_source.h"
#include "tokenizer/tokenizer.h"

namespace tangram::cli {

int cmd_tokenize(const TokenizeOptions& opt) {
  std::string text = opt.text;
  if (!opt.file.empty()) {
    std::ifstream in(opt.file, std::ios::binary);
    if (!in) {
      fmt::print(stderr, "error: cannot read {}\n", opt.file);
      return 1;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  auto vocab = load_vocab_file(opt.model, opt.flavor);
  if (!vocab) {
    fmt::print(stderr, "error: {}\n", vocab.message());
    return 1;
  }
  auto tok = Tokenizer::from_vocab(std::move(*vocab));
  if (!tok) {
    fmt::print(stderr, "error: {}\n", tok.message());
    return 1;
  }
  const auto ids = (*tok)->encode(text, opt.add_special, opt.parse_special);
  if (opt.ids_only) {
    for (size_t i = 0; i < ids.size(); ++i) fmt::print("{}{}", i ? " " : "", ids[i]);
    fmt::print("\n");
    return 0;
  }
  for (int32_t id : ids) {
    std::string shown;
    for (unsigned char c : (*tok)->token_to_piece(id)) {
      if (c == '\n') shown += "\\n";
      else if (c == '\t') shown += "\\t";
      else if (c < 0x20) shown += fmt::format("\\x{:02x}", c);
      else shown += static_cast<char>(c);
    }
    fmt::print("{:>8}  '{}'\n", id, shown);
  }
  fmt::print("{} tokens\n", ids.size());
  return 0;
}

}  // namespace tangram::cli
