// tangram: command-line entry point. Each command declares its own options (register_* in its
// cmd_*.cpp); main() registers them, parses the command line and runs the one given.
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/command.h"

using namespace tangram::cli;

int main(int argc, char** argv) {
  CLI::App app{"Tangram: a multi-turn LLM serving engine with non-uniform KV compression"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tangram 0.1.0");

  const std::vector<Command> commands = {
      register_info(app),          register_tokenize(app),    register_run(app),
      register_chat(app),          register_serve(app),       register_bench(app),
      register_bench_serve(app),   register_profile(app),     register_mkmodel(app),
      register_bench_model(app),   register_cluster(app),     register_perplexity(app),
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  for (const Command& command : commands)
    if (command.app->parsed()) return command.run();
  return 1;
}
