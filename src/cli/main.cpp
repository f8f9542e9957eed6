// tangram: command-line entry point. Each command declares its own options (register_* in its
// cmd_*.cpp); main() registers them, parses the command line and runs the one given.
#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "cli/cli_error.h"
#include "cli/command.h"

using namespace tangram::cli;

namespace {

// --dry-run: the command's resolved configuration as JSON on stdout, nothing loaded or run.
int print_plan(const Command& command) {
  if (!command.plan)
    return fail(
        fmt::format("--dry-run is not supported by `tangram {}` yet", command.app->get_name()));
  auto plan = command.plan();
  if (!plan) return fail(plan.message());
  nlohmann::json out{{"command", command.app->get_name()}, {"config", std::move(plan).value()}};
  std::fputs((out.dump(2) + "\n").c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tangram: a multi-turn LLM serving engine with non-uniform KV compression"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tangram 0.1.0");

  const std::vector<Command> commands = {
      register_info(app),        register_tokenize(app), register_run(app),
      register_chat(app),        register_serve(app),    register_bench(app),
      register_bench_serve(app), register_profile(app),  register_mkmodel(app),
      register_bench_model(app), register_cluster(app),  register_perplexity(app),
      register_recall(app),
  };

  bool dry_run = false;
  for (const Command& command : commands)
    command.app->add_flag("--dry-run", dry_run,
                          "Print the resolved configuration as JSON and exit; nothing is loaded");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  for (const Command& command : commands)
    if (command.app->parsed()) return dry_run ? print_plan(command) : command.run();
  return 1;
}
