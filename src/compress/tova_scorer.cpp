// TOVA (Oren et al., "Transformers are Multi-State RNNs"): attention of the last query only.
//   score(j) = (1/G) sum_g softmax_j(q_{last,g}·k_j / sqrt(d))   over the entries it may see
// Departure: upstream averages the last query's attention over all query heads of the layer and
// gives every KV head the same ranking; scoring one KV head at a time, Tangram averages over the
// head's own GQA group (G = q_per_kv). Entries after the query's position (not expected in use)
// score 0.
#include <algorithm>

#include "compress/scorer_factories.h"
#include "compress/scorer_math.h"

namespace tangram {
namespace {

class TovaScorer final : public Scorer {
 public:
  std::string_view name() const override { return "tova"; }
  QuerySource query_source() const override { return QuerySource::Observation; }
  int64_t queries_wanted(int64_t n_prompt) const override { return n_prompt > 0 ? 1 : 0; }

  Status score(const HeadScoreInput& in, float* scores) const override {
    TG_TRY(scorer_math::validate_input(in, scores, name(),
                                       {.keys = true, .positions = true, .queries = true}));
    if (in.n == 0) return Status::Ok();
    std::fill(scores, scores + in.n, 0.0f);
    const float inv_group = 1.0f / static_cast<float>(in.q_per_kv);
    scorer_math::for_each_attention_row(in, in.n_queries - 1, in.n_queries,
                                        [&](int64_t, int, const float* p, int64_t n_visible) {
                                          for (int64_t j = 0; j < n_visible; ++j)
                                            scores[j] += p[j] * inv_group;
                                        });
    return Status::Ok();
  }
};

}  // namespace

Result<std::unique_ptr<Scorer>> make_tova_scorer(const ScorerOptions&) {
  return std::unique_ptr<Scorer>(std::make_unique<TovaScorer>());
}

}  // namespace tangram
