#include "scorer_reference.h"

#include <algorithm>
#include <cmath>

namespace tangram::testing::ref {
namespace {

double dot(const double* a, const double* b, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

const double* key(const HeadData& h, int64_t j) { return h.keys.data() + j * h.head_dim; }
const double* query(const HeadData& h, int64_t i, int g) {
  return h.queries.data() + (i * h.group + g) * h.head_dim;
}

// Attention of query (i, g) over all entries: softmax of the visible ones, 0 for the others.
std::vector<double> attention(const HeadData& h, int64_t i, int g) {
  const int64_t n = h.n();
  std::vector<double> p(static_cast<size_t>(n), 0.0);
  double max_logit = -INFINITY;
  std::vector<double> logit(static_cast<size_t>(n), 0.0);
  for (int64_t j = 0; j < n; ++j) {
    if (h.positions[j] > h.query_positions[i]) continue;
    logit[j] = dot(query(h, i, g), key(h, j), h.head_dim) / std::sqrt(double(h.head_dim));
    max_logit = std::max(max_logit, logit[j]);
  }
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    if (h.positions[j] > h.query_positions[i]) continue;
    p[j] = std::exp(logit[j] - max_logit);
    sum += p[j];
  }
  for (double& x : p) x = sum > 0 ? x / sum : 0.0;
  return p;
}

// Index pairs rotated by RoPE frequency i.
std::pair<int, int> pair_of(const RopeSpec& rope, int i) {
  if (rope.layout == RopeLayout::Interleaved) return {2 * i, 2 * i + 1};
  return {i, i + rope.rope_dim / 2};
}

double inv_freq(const RopeSpec& rope, int i) {
  return std::pow(rope.base, -2.0 * i / rope.rope_dim);
}

}  // namespace

void rotate(const RopeSpec& rope, double pos, double angle_scale, double* x, int) {
  for (int i = 0; i < rope.rope_dim / 2; ++i) {
    const double angle = angle_scale * pos * inv_freq(rope, i);
    const auto [a, b] = pair_of(rope, i);
    const double xa = x[a], xb = x[b];
    x[a] = xa * std::cos(angle) - xb * std::sin(angle);
    x[b] = xa * std::sin(angle) + xb * std::cos(angle);
  }
}

std::vector<double> snapkv(const HeadData& h, int window, int kernel) {
  const int64_t n = h.n(), nq = h.n_queries();
  const int64_t w = std::min<int64_t>(window, nq);
  std::vector<double> mean(static_cast<size_t>(n), 0.0);
  for (int64_t i = nq - w; i < nq; ++i) {
    std::vector<double> best(static_cast<size_t>(n), 0.0);
    for (int g = 0; g < h.group; ++g) {
      const std::vector<double> p = attention(h, i, g);
      for (int64_t j = 0; j < n; ++j) best[j] = std::max(best[j], p[j]);
    }
    for (int64_t j = 0; j < n; ++j) mean[j] += best[j] / double(w);
  }
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    double m = -INFINITY;
    for (int64_t k = j - kernel / 2; k <= j + kernel / 2; ++k)
      if (k >= 0 && k < n) m = std::max(m, mean[k]);
    out[j] = m;
  }
  return out;
}

std::vector<double> tova(const HeadData& h) {
  std::vector<double> out(static_cast<size_t>(h.n()), 0.0);
  for (int g = 0; g < h.group; ++g) {
    const std::vector<double> p = attention(h, h.n_queries() - 1, g);
    for (int64_t j = 0; j < h.n(); ++j) out[j] += p[j] / h.group;
  }
  return out;
}

std::vector<double> keydiff(const HeadData& h) {
  const int d = h.head_dim;
  std::vector<double> anchor(static_cast<size_t>(d), 0.0);
  for (int64_t j = 0; j < h.n(); ++j) {
    const double norm = std::sqrt(dot(key(h, j), key(h, j), d));
    for (int c = 0; c < d; ++c) anchor[c] += key(h, j)[c] / norm / double(h.n());
  }
  const double anchor_norm = std::sqrt(dot(anchor.data(), anchor.data(), d));
  std::vector<double> out(static_cast<size_t>(h.n()));
  for (int64_t j = 0; j < h.n(); ++j) {
    const double norm = std::sqrt(dot(key(h, j), key(h, j), d));
    out[j] = -dot(key(h, j), anchor.data(), d) / (norm * anchor_norm);
  }
  return out;
}

std::vector<double> streamingllm(const HeadData& h) {
  return std::vector<double>(h.positions.begin(), h.positions.end());
}

std::vector<double> expected_attention(const HeadData& h, const RopeSpec& rope,
                                       const EaParams& prm) {
  const int d = h.head_dim;
  const int64_t n = h.n(), nq = h.n_queries();
  const int64_t first = nq > prm.skip ? prm.skip : 0;
  const int64_t n_obs = nq - first;
  // Keys rotated by the transpose of the mean future rotation.
  std::vector<double> kp(h.keys);
  for (int64_t j = 0; j < n; ++j) {
    double* k = kp.data() + j * d;
    for (int i = 0; i < rope.rope_dim / 2; ++i) {
      double c = 0.0, s = 0.0;
      for (int t = 0; t < prm.future; ++t) {
        const double angle = double(h.next_position + t) * inv_freq(rope, i);
        c += std::cos(angle) / prm.future;
        s += std::sin(angle) / prm.future;
      }
      const auto [a, b] = pair_of(rope, i);
      const double xa = k[a], xb = k[b];
      k[a] = xa * c + xb * s;  // [[c, s], [-s, c]]: the transpose of [[c, -s], [s, c]]
      k[b] = -xa * s + xb * c;
    }
  }
  std::vector<double> out(static_cast<size_t>(n), 0.0);
  for (int g = 0; g < h.group; ++g) {
    std::vector<std::vector<double>> pre;  // pre-RoPE queries of head g
    for (int64_t i = first; i < nq; ++i) {
      std::vector<double> q(query(h, i, g), query(h, i, g) + d);
      rotate(rope, h.query_positions[i], -1.0, q.data(), d);
      pre.push_back(q);
    }
    std::vector<double> mu(static_cast<size_t>(d), 0.0);
    for (const auto& q : pre)
      for (int c = 0; c < d; ++c) mu[c] += q[c] / double(n_obs);
    std::vector<double> cov(static_cast<size_t>(d * d), 0.0);
    for (const auto& q : pre)
      for (int a = 0; a < d; ++a)
        for (int b = 0; b < d; ++b)
          cov[a * d + b] += (q[a] - mu[a]) * (q[b] - mu[b]) / double(n_obs);
    std::vector<double> z(static_cast<size_t>(n));
    double zmax = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      const double* k = kp.data() + j * d;
      z[j] = dot(mu.data(), k, d) / std::sqrt(double(d));
      if (prm.covariance) {
        double quad = 0.0;
        for (int a = 0; a < d; ++a)
          for (int b = 0; b < d; ++b) quad += k[a] * cov[a * d + b] * k[b];
        z[j] += quad / (2.0 * d);
      }
      zmax = std::max(zmax, z[j]);
    }
    double sum = 0.0;
    for (double& x : z) sum += (x = std::exp(x - zmax));
    for (int64_t j = 0; j < n; ++j) out[j] += z[j] / sum / h.group;
  }
  if (prm.value_norm) {
    for (int64_t j = 0; j < n; ++j) {
      const double* v = h.values.data() + j * h.head_dim_v;
      out[j] = (out[j] + prm.epsilon) * std::sqrt(dot(v, v, h.head_dim_v));
    }
  }
  return out;
}

std::vector<double> kvzip(const HeadData& h) {
  std::vector<double> out(static_cast<size_t>(h.n()), 0.0);
  for (int64_t i = 0; i < h.n_queries(); ++i)
    for (int g = 0; g < h.group; ++g) {
      const std::vector<double> p = attention(h, i, g);
      for (int64_t j = 0; j < h.n(); ++j) out[j] = std::max(out[j], p[j]);
    }
  return out;
}

}  // namespace tangram::testing::ref
