// `tangram tokenize`: text → token ids (and pieces) with a model's or a file's tokenizer.
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/commands.h"
#include "cli/config_json.h"
#include "cli/vocab_source.h"
#include "common/file_text.h"
#include "tokenizer/tokenizer.h"

namespace tangram::cli {

int cmd_tokenize(const TokenizeOptions& opt) {
  std::string text = opt.text;
  if (!opt.file.empty()) {
    auto file = read_file_text(opt.file, "the text file");
    if (!file) {
      fmt::print(stderr, "error: {}\n", file.message());
      return 1;
    }
    text = std::move(*file);
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
      if (c == '\n')
        shown += "\\n";
      else if (c == '\t')
        shown += "\\t";
      else if (c < 0x20)
        shown += fmt::format("\\x{:02x}", c);
      else
        shown += static_cast<char>(c);
    }
    fmt::print("{:>8}  '{}'\n", id, shown);
  }
  fmt::print("{} tokens\n", ids.size());
  return 0;
}

Command register_tokenize(CLI::App& app) {
  auto opt = std::make_shared<TokenizeOptions>();
  TokenizeOptions& tok = *opt;
  auto* c_tok = app.add_subcommand("tokenize", "Turn text into token ids with a model's tokenizer");
  c_tok
      ->add_option("-m,--model", tok.model,
                   "GGUF model or vocab file, SentencePiece tokenizer.model, or tiktoken rank file")
      ->required()
      ->check(CLI::ExistingFile);
  c_tok->add_option("--flavor", tok.flavor, "For tiktoken files: llama3 or qwen2");
  auto* tok_text = c_tok->add_option("-p,--prompt,text", tok.text, "Text to tokenise");
  auto* tok_file = c_tok->add_option("-f,--file", tok.file, "Read the text from a file")
                       ->check(CLI::ExistingFile);
  tok_text->excludes(tok_file);
  c_tok->add_flag("--add-special", tok.add_special, "Add BOS/EOS as the vocabulary says");
  c_tok->add_flag("--parse-special", tok.parse_special,
                  "Recognise special-token texts such as <|im_start|>");
  c_tok->add_flag("--ids", tok.ids_only, "Print only the ids, space separated");
  return {c_tok, [opt] { return cmd_tokenize(*opt); }, [opt] { return plan_json(*opt); }};
}

}  // namespace tangram::cli
