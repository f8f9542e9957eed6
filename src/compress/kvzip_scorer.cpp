// KVzip-style scoring (Kim et al., "KVzip: Query-Agnostic KV Cache Compression with Context
// Reconstruction"): the engine runs a pass that asks the model to repeat the context and hands
// its queries here; an entry is worth keeping if any reconstruction query attends to it.
//   score(j) = max_{i, g} softmax_j(q_{i,g}·k_j / sqrt(d))   over the entries row i may see
// (causal by position; reconstruction queries come after all entries, so they see them all).
// Departure: KVzip's attention during reconstruction also covers the repeat prompt's own tokens;
// here the softmax is over the cached entries of this head only.
#include <algorithm>

#include "compress/scorer_factories.h"
#include "compress/scorer_math.h"

namespace tangram {
namespace {

class KvzipScorer final : public Scorer {
 public:
  std::string_view name() const override { return "kvzip"; }
  QuerySource query_source() const override { return QuerySource::Reconstruction; }
  int64_t queries_wanted(int64_t n_prompt) const override { return std::max<int64_t>(n_prompt, 0); }

  Status score(const HeadScoreInput& in, float* scores) const override {
    TG_TRY(scorer_math::validate_input(in, scores, name(),
                                       {.keys = true, .positions = true, .queries = true}));
    if (in.n == 0) return Status::Ok();
    std::fill(scores, scores + in.n, 0.0f);
    scorer_math::for_each_attention_row(in, 0, in.n_queries,
                                        [&](int64_t, int, const float* p, int64_t n_visible) {
                                          for (int64_t j = 0; j < n_visible; ++j)
                                            scores[j] = std::max(scores[j], p[j]);
                                        });
    return Status::Ok();
  }
};

}  // namespace

Result<std::unique_ptr<Scorer>> make_kvzip_scorer(const ScorerOptions&) {
  return std::unique_ptr<Scorer>(std::make_unique<KvzipScorer>());
}

}  // namespace tangram
