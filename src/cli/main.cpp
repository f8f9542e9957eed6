// tangram: command-line entry point. Parses arguments and dispatches to the cmd_* functions.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "cli/commands.h"

using namespace tangram::cli;

int main(int argc, char** argv) {
  CLI::App app{"Tangram: a multi-turn LLM serving engine with non-uniform KV compression"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tangram 0.1.0");

  InfoOptions info;
  auto* c_info = app.add_subcommand("info", "Show a GGUF file's metadata, tensors and sizes");
  c_info->add_option("model", info.model, "GGUF file")->required()->check(CLI::ExistingFile);
  c_info->add_flag("--full", info.full, "List every tensor and full metadata values");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if (*c_info) return cmd_info(info);
  return 1;
}
