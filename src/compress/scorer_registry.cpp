// make_scorer and scorer_names: the table from a scorer's name to its constructor.
#include <array>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compress/scorer.h"
#include "compress/scorer_factories.h"

namespace tangram {
namespace {

struct ScorerEntry {
  std::string_view name;
  Result<std::unique_ptr<Scorer>> (*make)(const ScorerOptions&);
};

constexpr std::array<ScorerEntry, 6> kScorers = {{
    {"snapkv", make_snapkv_scorer},
    {"tova", make_tova_scorer},
    {"keydiff", make_keydiff_scorer},
    {"streamingllm", make_streamingllm_scorer},
    {"expected_attention", make_expected_attention_scorer},
    {"kvzip", make_kvzip_scorer},
}};

}  // namespace

Result<std::unique_ptr<Scorer>> make_scorer(const ScorerOptions& options) {
  for (const ScorerEntry& e : kScorers) {
    if (e.name == options.name) return e.make(options);
  }
  return make_error("unknown scorer '{}' (valid: {})", options.name,
                    fmt::join(scorer_names(), ", "));
}

std::vector<std::string> scorer_names() {
  std::vector<std::string> names;
  names.reserve(kScorers.size());
  for (const ScorerEntry& e : kScorers) names.emplace_back(e.name);
  return names;
}

}  // namespace tangram
