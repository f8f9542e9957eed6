// ExpectedAttention (NVIDIA kvpress, "Expected Attention: KV cache compression by estimating
// attention from future queries' distribution"). Future queries are modelled from the last
// prompt queries and attention to each entry is estimated in closed form.
//   rows     = the query rows given (the last ea_queries of the prompt), minus the first ea_skip
//              of them when more than ea_skip are given
//   q̃_i      = R(-pos_i) q_i                          pre-RoPE query (RoPE undone, Rope::apply)
//   mu_g, Σ_g = mean and covariance (1/n_obs, biased) of q̃ over the rows, per query head g
//   R̄        = mean over t in [next_position, next_position + ea_future) of the rotation R(t)
//              (cos and sin averaged per frequency)
//   k'_j     = R̄ᵀ k_j                                 (keys are stored after RoPE)
//   z_{g,j}  = mu_g·k'_j / sqrt(d) + k'_jᵀ Σ_g k'_j / (2d)    (second term if ea_covariance)
//   p_j      = (1/G) sum_g softmax_j(z_{g,j})           over all entries (queries are future)
//   score_j  = (p_j + ea_epsilon) * ||v_j||   if ea_value_norm, else p_j
// Only the first rope_dim elements rotate (partial rotary): Rope::apply leaves the rest.
// Departure: kvpress estimates statistics from a chunk's own queries; here they are the rows the
// caller passes. k'ᵀΣk' is evaluated as sum_r (c_r·k')² over the centred queries when
// n_obs <= d (cheaper), else with the d×d matrix; both are exact.
#include <algorithm>
#include <cmath>
#include <vector>

#include "compress/scorer_factories.h"
#include "compress/scorer_math.h"
#include "kernels/ops.h"
#include "model/rope.h"

namespace tangram {
namespace {

// k'ᵀ Σ k' for one query head, as `m` dot products of length d.
struct QuadraticForm {
  bool low_rank = false;    // rows are centred queries / sqrt(n_obs): value = sum_r (row_r·k)²
  int m = 0;                // rows: n_obs (low rank) or d (the covariance matrix itself)
  std::vector<float> rows;  // [m][head_dim]

  float eval(const float* k, int d) const {
    float sum = 0.0f;
    for (int r = 0; r < m; ++r) {
      const float y = dot_f32(rows.data() + static_cast<size_t>(r) * static_cast<size_t>(d), k, d);
      sum += low_rank ? y * y : k[r] * y;
    }
    return sum;
  }
};

class ExpectedAttentionScorer final : public Scorer {
 public:
  explicit ExpectedAttentionScorer(const ScorerOptions& o) : opt_(o) {}

  std::string_view name() const override { return "expected_attention"; }
  QuerySource query_source() const override { return QuerySource::Observation; }
  int64_t queries_wanted(int64_t n_prompt) const override {
    return std::clamp<int64_t>(n_prompt, 0, opt_.ea_queries);
  }

  Status score(const HeadScoreInput& in, float* scores) const override {
    TG_TRY(scorer_math::validate_input(
        in, scores, name(), {.keys = true, .values = opt_.ea_value_norm, .queries = true}));
    if (in.rope == nullptr) return make_error("expected_attention scorer: null rope");
    if (2 * in.rope->half() > in.head_dim)
      return make_error("expected_attention scorer: rope_dim {} exceeds head_dim {}",
                        2 * in.rope->half(), in.head_dim);
    if (in.n == 0) return Status::Ok();

    const int d = in.head_dim;
    const int group = in.q_per_kv;
    const int64_t first_row = in.n_queries > opt_.ea_skip ? opt_.ea_skip : 0;
    const int64_t n_obs = in.n_queries - first_row;
    const std::vector<float> pre = unrotated_queries(in, first_row, n_obs);  // [n_obs][G][d]

    std::vector<float> mean(static_cast<size_t>(group) * static_cast<size_t>(d));  // [G][d]
    std::vector<QuadraticForm> quad(static_cast<size_t>(group));
    for (int g = 0; g < group; ++g) {
      head_statistics(pre, n_obs, group, g, d,
                      mean.data() + static_cast<size_t>(g) * static_cast<size_t>(d),
                      opt_.ea_covariance ? &quad[static_cast<size_t>(g)] : nullptr);
    }

    // Transposed mean future rotation: cos_mean, -sin_mean.   [rope_dim / 2] each
    std::vector<float> cos_mean, neg_sin_mean;
    mean_future_rotation(*in.rope, in.next_position, cos_mean, neg_sin_mean);

    // Logits z[g][j], keys rotated a block at a time (apply treats the block as heads of one
    // token, so one cos/sin row serves the whole block).
    const size_t n = static_cast<size_t>(in.n);
    std::vector<float> logits(static_cast<size_t>(group) * n);  // [G][n]
    constexpr int64_t kBlock = 256;
    std::vector<float> rotated(static_cast<size_t>(kBlock) *
                               static_cast<size_t>(d));  // [kBlock][d]
    const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
    const auto half_inv_d = static_cast<float>(0.5 / static_cast<double>(d));
    for (int64_t j0 = 0; j0 < in.n; j0 += kBlock) {
      const int64_t len = std::min(kBlock, in.n - j0);
      std::copy(in.keys + j0 * d, in.keys + (j0 + len) * d, rotated.begin());
      in.rope->apply(rotated.data(), 1, static_cast<int>(len), d, cos_mean.data(),
                     neg_sin_mean.data());
      for (int g = 0; g < group; ++g) {
        const float* mu = mean.data() + static_cast<size_t>(g) * static_cast<size_t>(d);
        float* z = logits.data() + static_cast<size_t>(g) * n + static_cast<size_t>(j0);
        for (int64_t b = 0; b < len; ++b) {
          const float* k = rotated.data() + b * d;
          z[b] = dot_f32(mu, k, d) * scale;
          if (opt_.ea_covariance) z[b] += quad[static_cast<size_t>(g)].eval(k, d) * half_inv_d;
        }
      }
    }

    std::fill(scores, scores + in.n, 0.0f);
    const float inv_group = 1.0f / static_cast<float>(group);
    for (int g = 0; g < group; ++g) {
      float* z = logits.data() + static_cast<size_t>(g) * n;
      scorer_math::softmax_inplace(z, in.n);
      for (size_t j = 0; j < n; ++j) scores[j] += z[j] * inv_group;
    }
    if (opt_.ea_value_norm) {
      const int dv = in.head_dim_v;
      for (int64_t j = 0; j < in.n; ++j) {
        const float* v = in.values + j * dv;
        scores[j] = (scores[j] + opt_.ea_epsilon) * std::sqrt(dot_f32(v, v, dv));
      }
    }
    return Status::Ok();
  }

 private:
  // Rows [first_row, first_row + n_obs) of the queries with their RoPE undone.
  static std::vector<float> unrotated_queries(const HeadScoreInput& in, int64_t first_row,
                                              int64_t n_obs) {
    const int64_t row_len = static_cast<int64_t>(in.q_per_kv) * in.head_dim;
    std::vector<float> pre(in.queries + first_row * row_len,
                           in.queries + (first_row + n_obs) * row_len);  // [n_obs][G][d]
    const auto half = static_cast<size_t>(in.rope->half());
    std::vector<float> cos(half), sin(half);  // [rope_dim / 2]
    for (int64_t r = 0; r < n_obs; ++r) {
      in.rope->tables(in.query_positions[first_row + r], 1, cos.data(), sin.data());
      for (float& s : sin) s = -s;  // rotating by -pos
      in.rope->apply(pre.data() + r * row_len, 1, in.q_per_kv, in.head_dim, cos.data(), sin.data());
    }
    return pre;
  }

  // Mean (double accumulated) of head g's pre-RoPE queries into mean_out [d]; and, if quad is
  // set, the form evaluating k'ᵀ Σ k' with Σ the biased covariance.
  //   pre: [n_obs][group][d]
  static void head_statistics(const std::vector<float>& pre, int64_t n_obs, int group, int g, int d,
                              float* mean_out, QuadraticForm* quad) {
    auto at = [&](int64_t r, int c) {
      return static_cast<double>(pre[static_cast<size_t>((r * group + g) * d + c)]);
    };
    std::vector<double> mu(static_cast<size_t>(d), 0.0);  // [d]
    for (int64_t r = 0; r < n_obs; ++r)
      for (int c = 0; c < d; ++c) mu[static_cast<size_t>(c)] += at(r, c);
    for (int c = 0; c < d; ++c) {
      mu[static_cast<size_t>(c)] /= static_cast<double>(n_obs);
      mean_out[c] = static_cast<float>(mu[static_cast<size_t>(c)]);
    }
    if (quad == nullptr) return;
    const auto du = static_cast<size_t>(d);
    if (n_obs <= d) {
      quad->low_rank = true;
      quad->m = static_cast<int>(n_obs);
      quad->rows.assign(static_cast<size_t>(n_obs) * du, 0.0f);
      const double inv_sqrt = 1.0 / std::sqrt(static_cast<double>(n_obs));
      for (int64_t r = 0; r < n_obs; ++r)
        for (int c = 0; c < d; ++c)
          quad->rows[static_cast<size_t>(r) * du + static_cast<size_t>(c)] =
              static_cast<float>((at(r, c) - mu[static_cast<size_t>(c)]) * inv_sqrt);
      return;
    }
    std::vector<double> cov(du * du, 0.0);  // [d][d]
    std::vector<double> centred(du);        // [d]
    for (int64_t r = 0; r < n_obs; ++r) {
      for (int c = 0; c < d; ++c)
        centred[static_cast<size_t>(c)] = at(r, c) - mu[static_cast<size_t>(c)];
      for (size_t a = 0; a < du; ++a)
        for (size_t b = 0; b < du; ++b) cov[a * du + b] += centred[a] * centred[b];
    }
    quad->low_rank = false;
    quad->m = d;
    quad->rows.resize(du * du);
    for (size_t i = 0; i < du * du; ++i)
      quad->rows[i] = static_cast<float>(cov[i] / static_cast<double>(n_obs));
  }

  // cos and -sin of the rotation averaged over the ea_future positions after the context.
  void mean_future_rotation(const Rope& rope, int64_t next_position, std::vector<float>& cos_mean,
                            std::vector<float>& neg_sin_mean) const {
    const auto half = static_cast<size_t>(rope.half());
    std::vector<double> cos_sum(half, 0.0), sin_sum(half, 0.0);  // [rope_dim / 2]
    constexpr int64_t kChunk = 256;  // positions per tables() call: bounded scratch
    std::vector<float> cos(static_cast<size_t>(kChunk) * half),
        sin(static_cast<size_t>(kChunk) * half);
    for (int64_t t0 = 0; t0 < opt_.ea_future; t0 += kChunk) {
      const int64_t len = std::min<int64_t>(kChunk, opt_.ea_future - t0);
      rope.tables(next_position + t0, len, cos.data(), sin.data());
      for (int64_t t = 0; t < len; ++t)
        for (size_t i = 0; i < half; ++i) {
          cos_sum[i] += static_cast<double>(cos[static_cast<size_t>(t) * half + i]);
          sin_sum[i] += static_cast<double>(sin[static_cast<size_t>(t) * half + i]);
        }
    }
    cos_mean.resize(half);
    neg_sin_mean.resize(half);
    const auto count = static_cast<double>(opt_.ea_future);
    for (size_t i = 0; i < half; ++i) {
      cos_mean[i] = static_cast<float>(cos_sum[i] / count);
      neg_sin_mean[i] = static_cast<float>(-sin_sum[i] / count);
    }
  }

  ScorerOptions opt_;
};

}  // namespace

Result<std::unique_ptr<Scorer>> make_expected_attention_scorer(const ScorerOptions& options) {
  if (options.ea_queries < 1)
    return make_error("expected_attention: ea_queries must be >= 1, got {}", options.ea_queries);
  if (options.ea_skip < 0)
    return make_error("expected_attention: ea_skip must be >= 0, got {}", options.ea_skip);
  if (options.ea_future < 1)
    return make_error("expected_attention: ea_future must be >= 1, got {}", options.ea_future);
  if (!(options.ea_epsilon >= 0.0f) || !std::isfinite(options.ea_epsilon))
    return make_error("expected_attention: ea_epsilon must be finite and >= 0, got {}",
                      options.ea_epsilon);
  return std::unique_ptr<Scorer>(std::make_unique<ExpectedAttentionScorer>(options));
}

}  // namespace tangram
