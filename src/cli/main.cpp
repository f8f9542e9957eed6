// tangram: command-line entry point. Each command declares its own options (register_* in its
// cmd_*.cpp); main() registers them, parses the command line and runs the one given.
#include <cstdio>
#include <string_view>
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

// `tangram serve --config FILE` as `tangram --config FILE serve`: CLI11 reads a config file on
// the top-level app only (its [serve] section then sets serve's flags).
std::vector<char*> config_first(int argc, char** argv) {
  // Where `--config FILE` (2 arguments) or `--config=FILE` (1) sits after the command, if it does.
  int at = -1, n = 0;
  for (int i = 2; i < argc && at < 0; ++i) {
    const std::string_view a = argv[i];
    if (a == "--") break;
    if (a == "--config" && i + 1 < argc) {
      at = i;
      n = 2;
    } else if (a.starts_with("--config=")) {
      at = i;
      n = 1;
    }
  }
  std::vector<char*> args;
  args.reserve(static_cast<size_t>(argc));
  args.push_back(argv[0]);
  for (int k = 0; k < n; ++k) args.push_back(argv[at + k]);
  for (int i = 1; i < argc; ++i)
    if (at < 0 || i < at || i >= at + n) args.push_back(argv[i]);
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tangram: a multi-turn LLM serving engine with non-uniform KV compression"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tangram 0.1.0");
  // A flag in a config file that no command has is an error, not silently ignored (subcommands
  // take this setting when they are added, below).
  app.allow_config_extras(CLI::config_extras_mode::error);
  // A service's settings live in a file (the Debian package's /etc/tangram/serve.toml): a
  // section per command, one `flag-name = value` line per flag ([serve] then port = 8080,
  // kv-memory = "4GiB", api-key-file = "..."); flags on the command line win over the file.
  app.set_config("--config", "",
                 "Read flags from a TOML file: a [command] section of 'flag-name = value' lines "
                 "(also accepted after the command: tangram serve --config FILE)");

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

  std::vector<char*> args = config_first(argc, argv);
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  for (const Command& command : commands)
    if (command.app->parsed()) return dry_run ? print_plan(command) : command.run();
  return 1;
}
