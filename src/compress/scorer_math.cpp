#include "compress/scorer_math.h"

#include <cmath>

#include "kernels/ops.h"

namespace tangram::scorer_math {

Status validate_input(const HeadScoreInput& in, const float* scores, std::string_view scorer,
                      Needs needs) {
  if (in.n < 0) return make_error("{} scorer: negative entry count {}", scorer, in.n);
  if (in.head_dim <= 0)
    return make_error("{} scorer: head_dim must be > 0, got {}", scorer, in.head_dim);
  if (in.q_per_kv < 1)
    return make_error("{} scorer: q_per_kv must be >= 1, got {}", scorer, in.q_per_kv);
  if (in.n_queries < 0)
    return make_error("{} scorer: negative query count {}", scorer, in.n_queries);
  if (needs.values && in.head_dim_v <= 0)
    return make_error("{} scorer: head_dim_v must be > 0, got {}", scorer, in.head_dim_v);
  if (needs.queries) {
    if (in.n_queries < 1) return make_error("{} scorer: needs at least one query row", scorer);
    if (in.queries == nullptr || in.query_positions == nullptr)
      return make_error("{} scorer: {} query rows but null queries or query_positions", scorer,
                        in.n_queries);
  }
  if (in.n == 0) return Status::Ok();
  if (scores == nullptr) return make_error("{} scorer: null scores for {} entries", scorer, in.n);
  if (needs.keys && in.keys == nullptr) return make_error("{} scorer: null keys", scorer);
  if (needs.values && in.values == nullptr) return make_error("{} scorer: null values", scorer);
  if (needs.positions) {
    if (in.positions == nullptr) return make_error("{} scorer: null positions", scorer);
    for (int64_t j = 1; j < in.n; ++j) {
      if (in.positions[j] < in.positions[j - 1])
        return make_error("{} scorer: positions not ascending at entry {} ({} after {})", scorer, j,
                          in.positions[j], in.positions[j - 1]);
    }
  }
  return Status::Ok();
}

void softmax_inplace(float* x, int64_t n) {
  if (n <= 0) return;
  float max_v = x[0];
  for (int64_t j = 1; j < n; ++j) max_v = std::max(max_v, x[j]);
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    x[j] = std::exp(x[j] - max_v);
    sum += static_cast<double>(x[j]);
  }
  const auto inv = static_cast<float>(1.0 / sum);  // sum >= 1: the max term is exp(0)
  for (int64_t j = 0; j < n; ++j) x[j] *= inv;
}

int64_t visible_entries(const int32_t* positions, int64_t n, int32_t query_position) {
  return std::upper_bound(positions, positions + n, query_position) - positions;
}

void tile_softmax_rows(const float* const* q, const int64_t* n_visible, int tile, const float* keys,
                       int head_dim, float* probs, int64_t stride) {
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  int64_t longest = 0;
  for (int t = 0; t < tile; ++t) longest = std::max(longest, n_visible[t]);
  for (int64_t j = 0; j < longest; ++j) {
    const float* k = keys + j * head_dim;
    for (int t = 0; t < tile; ++t) {
      if (j < n_visible[t]) probs[t * stride + j] = dot_f32(q[t], k, head_dim) * scale;
    }
  }
  for (int t = 0; t < tile; ++t) softmax_inplace(probs + t * stride, n_visible[t]);
}

}  // namespace tangram::scorer_math
