// StreamingLLM (Xiao et al., "Efficient Streaming Language Models with Attention Sinks"):
// score_j = positions[j], so the most recent entries rank highest. Together with the sink that
// the keep policy always retains, this keeps "sink + recent window". Query-free.
// Departure: none. Positions above 2^24 are not exactly representable in float; neighbours may
// then tie, which only affects ties between adjacent entries.
#include "compress/scorer_factories.h"
#include "compress/scorer_math.h"

namespace tangram {
namespace {

class StreamingLlmScorer final : public Scorer {
 public:
  std::string_view name() const override { return "streamingllm"; }
  QuerySource query_source() const override { return QuerySource::None; }
  int64_t queries_wanted(int64_t) const override { return 0; }

  Status score(const HeadScoreInput& in, float* scores) const override {
    TG_TRY(scorer_math::validate_input(in, scores, name(), {.positions = true}));
    for (int64_t j = 0; j < in.n; ++j) scores[j] = static_cast<float>(in.positions[j]);
    return Status::Ok();
  }
};

}  // namespace

Result<std::unique_ptr<Scorer>> make_streamingllm_scorer(const ScorerOptions&) {
  return std::unique_ptr<Scorer>(std::make_unique<StreamingLlmScorer>());
}

}  // namespace tangram
