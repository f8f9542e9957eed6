// Every flag a command lists in --help either acts or is refused: run with a cheap value and
// --dry-run, it must change the resolved configuration the command prints (config_json.h), or
// exit non-zero with an error. A flag that is accepted and leaves the configuration unchanged is
// one the command ignores.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace tangram {
namespace {

using testing::run_tangram;

struct HelpFlag {
  std::string name;  // the long name (or the short one when it has none), with dashes
  std::string spec;  // what --help prints after the names: type, checks, [default]
  bool takes_value = false;
};

// The options of a command's --help ("  -m,--model TEXT:FILE REQUIRED  GGUF model").
std::vector<HelpFlag> flags_of(const std::string& help) {
  std::vector<HelpFlag> flags;
  std::istringstream in(help);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("  -", 0) != 0) continue;
    const std::string head = line.substr(
        2, line.find("  ", 2) == std::string::npos ? std::string::npos : line.find("  ", 2) - 2);
    const size_t names_end = head.find(' ');
    const std::string names = head.substr(0, names_end);
    HelpFlag f;
    std::istringstream ns(names);
    std::string n;
    while (std::getline(ns, n, ',')) {
      n = n.substr(0, n.find('{'));  // a negated flag prints its value: "--no-accuracy{false}"
      if (f.name.empty() || (n.rfind("--", 0) == 0 && f.name.rfind("--", 0) != 0)) f.name = n;
    }
    if (names_end != std::string::npos) {
      f.spec = head.substr(names_end + 1);
      f.takes_value = true;
    }
    flags.push_back(f);
  }
  return flags;
}

std::optional<double> number(const std::string& s) {
  try {
    size_t used = 0;
    const double v = std::stod(s, &used);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

std::string format_number(double v, bool integral) {
  if (integral) return std::to_string(static_cast<long long>(v));
  std::ostringstream o;
  o << v;
  return o.str();
}

// A cheap value for a flag, different from its default, from the type and checks --help shows.
std::string value_for(const HelpFlag& f, const std::string& existing_file) {
  static const std::map<std::string, std::string> by_name = {
      {"--kv-memory", "256MiB"},
      {"--kv-host-memory", "64MiB"},
      {"--kv-disk-max", "1GiB"},
      {"--max-body", "1MiB"},
      {"--max-header-bytes", "16KiB"},
      {"--kv-redis", "127.0.0.1:6390"},
      {"--host", "0.0.0.0"},
      {"--kv-scorer", "snapkv"},
      {"--scorer", "snapkv"},
      {"--chat-template", "chatml"},
      {"--flavor", "qwen2"},
      {"--preset", "tiny-qwen2"},
      {"--arch", "qwen2"},
      {"--type", "q8_0"},
      {"--kv-idle-offload", "5"},
  };
  // Where a command's default is the value above (bench's --type is q8_0).
  static const std::map<std::string, std::string> alternative = {{"--type", "q4_k"}};
  const std::string& spec = f.spec;
  // The default: "TYPE [d]", or "TYPE=d" when the line is long.
  std::smatch m;
  std::string def;
  if (std::regex_search(spec, m, std::regex(R"(=(\S+)\s*$)")))
    def = m[1];
  else if (std::regex_search(spec, m, std::regex(R"(\[([^\]]*)\]\s*(REQUIRED)?\s*$)")) &&
           m.prefix().str().size() >= 3 &&
           m.prefix().str().substr(m.prefix().str().size() - 3) != "in ")
    def = m[1];
  if (auto it = by_name.find(f.name); it != by_name.end())
    return it->second == def ? alternative.at(f.name) : it->second;
  if (spec.find(":FILE") != std::string::npos) return existing_file;
  if (std::regex_search(spec, m, std::regex(R"(\{([^}]*)\})"))) {
    std::istringstream members(m[1].str());
    std::string v;
    while (std::getline(members, v, ','))
      if (v != def) return v;
  }
  const bool integral = spec.rfind("INT", 0) == 0 || spec.rfind("UINT", 0) == 0;
  const bool numeric = integral || spec.rfind("FLOAT", 0) == 0;
  if (!numeric) return "x";
  double lo = -1e18, hi = 1e18;
  if (std::regex_search(spec, m, std::regex(R"(in \[([-0-9.e]+) - ([-0-9.e]+)\])"))) {
    lo = std::stod(m[1]);
    hi = std::stod(m[2]);
  }
  if (spec.find("POSITIVE") != std::string::npos) lo = std::max(lo, 1.0);
  if (spec.find("NONNEGATIVE") != std::string::npos) lo = std::max(lo, 0.0);
  const std::optional<double> d = number(def);
  for (double candidate : {d ? *d + 1 : 3.0, lo + 1, lo, hi, (lo + hi) / 2})
    if (candidate >= lo && candidate <= hi && (!d || candidate != *d))
      return format_number(candidate, integral);
  return "1";
}

struct CommandCase {
  std::string name;
  std::string base_args;  // the required ones, given before every flag
};

TEST(CliFlags, EveryListedFlagActsOrIsRefused) {
  const std::string model = testing::data_file("models/stories260K/stories260K.gguf").string();
  const std::string text = testing::data_file("models/stories260K/README.md").string();
  const std::string tmp = testing::temp_dir().string();
  const std::string q = "'";
  const std::vector<CommandCase> commands = {
      {"info", q + model + q},
      {"tokenize", "-m " + q + model + q},
      {"run", "-m " + q + model + q + " -p hello"},
      {"chat", "-m " + q + model + q},
      {"serve", "-m " + q + model + q},
      {"profile", "-m " + q + model + q},
      {"mkmodel", "-o " + q + tmp + "/m.gguf" + q},
      {"cluster", "--kv-profile " + q + text + q},
      {"perplexity", "-m " + q + model + q + " -f " + q + text + q},
      {"recall", "-m " + q + model + q},
      {"bench", ""},
      {"bench-model", ""},
      {"bench-serve", ""},
  };
  for (const CommandCase& c : commands) {
    SCOPED_TRACE(c.name);
    const auto help = run_tangram(c.name + " --help");
    ASSERT_EQ(help.exit_code, 0) << help.output;
    const auto base = run_tangram(c.name + " " + c.base_args + " --dry-run");
    ASSERT_EQ(base.exit_code, 0) << base.output;
    const nlohmann::json baseline = nlohmann::json::parse(base.output);
    int acted = 0;
    for (const HelpFlag& f : flags_of(help.output)) {
      if (f.name == "--help" || f.name == "--dry-run" ||
          c.base_args.find(f.name + " ") != std::string::npos)
        continue;
      if (f.spec.find("REQUIRED") != std::string::npos) continue;  // given in base_args
      const std::string arg = f.takes_value ? f.name + " " + q + value_for(f, model) + q : f.name;
      const auto r = run_tangram(c.name + " " + c.base_args + " " + arg + " --dry-run");
      if (r.exit_code != 0) {  // refused: with a message and not by a crash
        EXPECT_LT(r.exit_code, 128) << arg << ": " << r.output;
        EXPECT_FALSE(r.output.empty()) << arg;
        // Not refused as unknown: that is this test misreading --help, and the flag goes unchecked.
        EXPECT_EQ(r.output.find("were not expected"), std::string::npos) << arg << ": " << r.output;
        continue;
      }
      const nlohmann::json config =
          nlohmann::json::parse(r.output, nullptr, /*allow_exceptions=*/false);
      ASSERT_FALSE(config.is_discarded()) << arg << ": " << r.output;
      EXPECT_TRUE(config != baseline)
          << "tangram " << c.name << " accepts " << arg << " but its configuration does not change";
      ++acted;
    }
    EXPECT_GT(acted, 0) << "no flag of " << c.name << " was checked";
  }
}

TEST(CliFlags, DryRunLoadsNothing) {
  // A model path that does not exist would fail the load; --dry-run with a file that is not a
  // GGUF at all must still print the configuration, as it never opens it.
  const std::string text = testing::data_file("models/stories260K/README.md").string();
  const auto r = run_tangram("run -m '" + text + "' -p hi --dry-run");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["command"], "run");
  EXPECT_EQ(j["config"]["engine"]["kv_type"], "f16");
}

TEST(CliFlags, KvGroupScopeIsGlobalByDefaultAndPerLayerOnRequest) {
  const std::string model = testing::data_file("models/stories260K/stories260K.gguf").string();
  const std::string base = "run -m '" + model + "' -p hi --dry-run";
  const auto plain = run_tangram(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(nlohmann::json::parse(plain.output)["config"]["engine"]["compression"]["group_scope"],
            "global");
  const auto per_layer = run_tangram(base + " --kv-group-scope per-layer");
  ASSERT_EQ(per_layer.exit_code, 0) << per_layer.output;
  EXPECT_EQ(
      nlohmann::json::parse(per_layer.output)["config"]["engine"]["compression"]["group_scope"],
      "per-layer");
  const auto bad = run_tangram(base + " --kv-group-scope layer");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("global"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace tangram

namespace tangram {
namespace {

TEST(CliFlags, ServeReadsItsFlagsFromAConfigFileTheCommandLineWinning) {
  const std::string model = testing::data_file("models/stories260K/stories260K.gguf").string();
  const auto dir = testing::temp_dir();
  const std::string conf = (dir / "serve.toml").string();
  {
    std::ofstream f(conf);
    f << "# the packaged settings' form\n[serve]\nmodel = \"" << model
      << "\"\nport = 8123\nkv-memory = \"32MiB\"\napi-key = [\"a\", \"b\"]\n"
         "context-overflow = \"refuse\"\n";
  }
  for (const std::string& form : {"serve --config '" + conf + "'", "--config '" + conf + "' serve",
                                  "serve --config='" + conf + "'"}) {
    const auto r = run_tangram(form + " --dry-run");
    ASSERT_EQ(r.exit_code, 0) << form << "\n" << r.output;
    const nlohmann::json j = nlohmann::json::parse(r.output)["config"];
    EXPECT_EQ(j["port"], 8123) << form;
    EXPECT_EQ(j["api_keys"], 2);
    EXPECT_EQ(j["context_overflow"], "refuse");
    EXPECT_EQ(j["engine"]["kv_memory"], 32 << 20);
  }
  const auto wins = run_tangram("serve --config '" + conf + "' --port 9000 --dry-run");
  ASSERT_EQ(wins.exit_code, 0) << wins.output;
  EXPECT_EQ(nlohmann::json::parse(wins.output)["config"]["port"], 9000);
  {
    std::ofstream f(conf, std::ios::app);
    f << "kv-memroy = \"1GiB\"\n";  // a misspelt flag is an error, not ignored
  }
  const auto typo = run_tangram("serve --config '" + conf + "' --dry-run");
  EXPECT_NE(typo.exit_code, 0);
  EXPECT_NE(typo.output.find("kv-memroy"), std::string::npos) << typo.output;
}

}  // namespace
}  // namespace tangram
