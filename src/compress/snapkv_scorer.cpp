// SnapKV (Li et al., "SnapKV: LLM Knows What You are Looking for Before Generation").
// Observation window: the last W = min(snap_window, n_queries) query rows given.
//   p_{i,g}(j) = softmax_j(q_{i,g}·k_j / sqrt(d)) over the entries row i may see
//                (causal: positions[j] <= query_positions[i]; others have p = 0)
//   s(j)       = (1/W) sum_i max_g p_{i,g}(j)           (max over the GQA group, then mean)
//   score(j)   = max_{|j'-j| <= snap_kernel/2} s(j')    (1-D max-pool, stride 1, same padding)
// Departures from the paper's code (which scores every query head and average-pools): as in
// Tangram's reference, the GQA group is reduced by max over the per-head softmax, and pooling
// is by max. A window row that sees no entry contributes 0 (still counted
// in W). The softmax runs in float with a double sum; the window mean is accumulated in double.
#include <algorithm>
#include <vector>

#include "compress/scorer_factories.h"
#include "compress/scorer_math.h"

namespace tangram {
namespace {

class SnapKvScorer final : public Scorer {
 public:
  SnapKvScorer(int window, int kernel) : window_(window), kernel_(kernel) {}

  std::string_view name() const override { return "snapkv"; }
  QuerySource query_source() const override { return QuerySource::Observation; }
  int64_t queries_wanted(int64_t n_prompt) const override {
    return std::clamp<int64_t>(n_prompt, 0, window_);
  }

  Status score(const HeadScoreInput& in, float* scores) const override {
    TG_TRY(scorer_math::validate_input(in, scores, name(),
                                       {.keys = true, .positions = true, .queries = true}));
    if (in.n == 0) return Status::Ok();
    const size_t n = static_cast<size_t>(in.n);
    const int64_t first_row = std::max<int64_t>(0, in.n_queries - window_);
    const int64_t rows = in.n_queries - first_row;
    std::vector<double> window_sum(n, 0.0);  // [n] sum over rows of the group max
    std::vector<float> group_max(n, 0.0f);   // [n] max over the current row's heads
    int64_t group_visible = 0;               // entries the current row sees
    const int last_head = in.q_per_kv - 1;
    scorer_math::for_each_attention_row(
        in, first_row, in.n_queries, [&](int64_t, int head, const float* p, int64_t n_visible) {
          if (head == 0) {
            std::copy(p, p + n_visible, group_max.begin());
            group_visible = n_visible;
          } else {
            for (int64_t j = 0; j < n_visible; ++j)
              group_max[static_cast<size_t>(j)] = std::max(group_max[static_cast<size_t>(j)], p[j]);
          }
          if (head == last_head) {
            for (int64_t j = 0; j < group_visible; ++j)
              window_sum[static_cast<size_t>(j)] +=
                  static_cast<double>(group_max[static_cast<size_t>(j)]);
          }
        });
    // Pool the window mean into scores: out[j] = max over the clipped kernel around j.
    const double inv_rows = 1.0 / static_cast<double>(rows);
    const int64_t radius = kernel_ / 2;
    for (int64_t j = 0; j < in.n; ++j) {
      const int64_t lo = std::max<int64_t>(0, j - radius);
      const int64_t hi = std::min<int64_t>(in.n - 1, j + radius);
      double best = window_sum[static_cast<size_t>(lo)];
      for (int64_t k = lo + 1; k <= hi; ++k)
        best = std::max(best, window_sum[static_cast<size_t>(k)]);
      scores[j] = static_cast<float>(best * inv_rows);
    }
    return Status::Ok();
  }

 private:
  int window_;
  int kernel_;
};

}  // namespace

Result<std::unique_ptr<Scorer>> make_snapkv_scorer(const ScorerOptions& options) {
  if (options.snap_window < 1)
    return make_error("snapkv: snap_window must be >= 1, got {}", options.snap_window);
  if (options.snap_kernel < 1 || options.snap_kernel % 2 == 0)
    return make_error("snapkv: snap_kernel must be odd and >= 1, got {}", options.snap_kernel);
  return std::unique_ptr<Scorer>(
      std::make_unique<SnapKvScorer>(options.snap_window, options.snap_kernel));
}

}  // namespace tangram
