// KeyDiff (Park et al., "KeyDiff: Key Similarity-Based KV Cache Eviction"): query-free.
//   anchor = mean_j k_j / max(||k_j||, 1e-12)             (mean of the L2-normalised keys)
//   score_j = -cos(k_j, anchor) = -k_j·anchor / max(||k_j|| ||anchor||, 1e-8)
// Keys least like the average direction are kept. The epsilons follow torch's normalize and
// cosine_similarity. The anchor is accumulated in double (n can be ~1e5).
#include <cmath>
#include <vector>

#include "compress/scorer_factories.h"
#include "compress/scorer_math.h"
#include "kernels/ops.h"

namespace tangram {
namespace {

class KeyDiffScorer final : public Scorer {
 public:
  std::string_view name() const override { return "keydiff"; }
  QuerySource query_source() const override { return QuerySource::None; }
  int64_t queries_wanted(int64_t) const override { return 0; }

  Status score(const HeadScoreInput& in, float* scores) const override {
    TG_TRY(scorer_math::validate_input(in, scores, name(), {.keys = true}));
    if (in.n == 0) return Status::Ok();
    const int d = in.head_dim;
    std::vector<float> key_norm(static_cast<size_t>(in.n));       // [n]
    std::vector<double> anchor_sum(static_cast<size_t>(d), 0.0);  // [head_dim]
    for (int64_t j = 0; j < in.n; ++j) {
      const float* k = in.keys + j * d;
      const double norm = std::sqrt(static_cast<double>(dot_f32(k, k, d)));
      key_norm[static_cast<size_t>(j)] = static_cast<float>(norm);
      const double inv = 1.0 / std::max(norm, 1e-12);
      for (int c = 0; c < d; ++c)
        anchor_sum[static_cast<size_t>(c)] += static_cast<double>(k[c]) * inv;
    }
    std::vector<float> anchor(static_cast<size_t>(d));  // [head_dim]
    double anchor_sq = 0.0;
    for (int c = 0; c < d; ++c) {
      const double a = anchor_sum[static_cast<size_t>(c)] / static_cast<double>(in.n);
      anchor[static_cast<size_t>(c)] = static_cast<float>(a);
      anchor_sq += a * a;
    }
    const double anchor_norm = std::sqrt(anchor_sq);
    for (int64_t j = 0; j < in.n; ++j) {
      const double dot = static_cast<double>(dot_f32(in.keys + j * d, anchor.data(), d));
      const double denom =
          std::max(static_cast<double>(key_norm[static_cast<size_t>(j)]) * anchor_norm, 1e-8);
      scores[j] = static_cast<float>(-dot / denom);
    }
    return Status::Ok();
  }
};

}  // namespace

Result<std::unique_ptr<Scorer>> make_keydiff_scorer(const ScorerOptions&) {
  return std::unique_ptr<Scorer>(std::make_unique<KeyDiffScorer>());
}

}  // namespace tangram
