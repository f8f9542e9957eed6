#include "reference_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "kernels/quant.h"

namespace tangram::testing {

namespace {

using Vec = std::vector<double>;

void rmsnorm_into(const Vec& x, const Vec& w, double eps, Vec& out) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  out.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] * inv * w[i];
}

}  // namespace

std::vector<double> reference_llama3_divisors(int head_dim, double base, double factor,
                                              double low_freq_factor, double high_freq_factor,
                                              double original_context) {
  std::vector<double> d;
  for (int i = 0; i < head_dim / 2; ++i) {
    const double freq = 1.0 / std::pow(base, static_cast<double>(2 * i) / head_dim);
    const double wavelen = 2.0 * std::numbers::pi / freq;
    double scaled_freq;
    if (wavelen < original_context / high_freq_factor) {
      scaled_freq = freq;
    } else if (wavelen > original_context / low_freq_factor) {
      scaled_freq = freq / factor;
    } else {
      const double smooth =
          (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      scaled_freq = (1.0 - smooth) * freq / factor + smooth * freq;
    }
    d.push_back(freq / scaled_freq);
  }
  return d;
}

void ReferenceModel::matvec(const Matrix& m, const Vec& x, Vec& out) const {
  std::vector<float> xf(x.begin(), x.end());  // the engine's activations are float
  GgmlType act = GgmlType::F32;
  if (p_.round_activations) {
    if (m.type == GgmlType::Q4_0 || m.type == GgmlType::Q8_0) act = GgmlType::Q8_0;
    if (m.type == GgmlType::Q4_K || m.type == GgmlType::Q6_K) act = GgmlType::Q8_K;
  }
  if (act != GgmlType::F32) {
    std::vector<uint8_t> q(ggml_row_bytes(act, m.cols));
    quantize_row(act, xf.data(), q.data(), m.cols);
    dequantize_row(act, q.data(), xf.data(), m.cols);
  }
  out.assign(static_cast<size_t>(m.rows), 0.0);
  for (int64_t r = 0; r < m.rows; ++r) {
    const float* row = m.w.data() + r * m.cols;
    // Four partial sums only to let the loop pipeline; every product and sum is in double.
    double s[4] = {0, 0, 0, 0};
    int64_t c = 0;
    for (; c + 4 <= m.cols; c += 4)
      for (int j = 0; j < 4; ++j)
        s[j] +=
            static_cast<double>(row[c + j]) * static_cast<double>(xf[static_cast<size_t>(c + j)]);
    for (; c < m.cols; ++c)
      s[0] += static_cast<double>(row[c]) * static_cast<double>(xf[static_cast<size_t>(c)]);
    out[static_cast<size_t>(r)] = (s[0] + s[1]) + (s[2] + s[3]);
  }
}

ReferenceModel::Matrix ReferenceModel::matrix(const GgufFile& g, const std::string& name) const {
  const TensorView v = g.view(std::string_view(name));
  EXPECT_FALSE(v.empty()) << "reference: missing tensor " << name;
  Matrix m;
  if (v.empty()) return m;
  m.rows = v.rows();
  m.cols = v.cols();
  m.type = v.type;
  m.w.resize(static_cast<size_t>(m.rows * m.cols));
  // copy_row: the file's row bytes, whatever layout the loader rewrote them into.
  std::vector<uint8_t> row(v.row_bytes());
  for (int64_t r = 0; r < m.rows; ++r) {
    v.copy_row(r, row.data());
    dequantize_row(v.type, row.data(), m.w.data() + r * m.cols, m.cols);
  }
  return m;
}

std::vector<double> ReferenceModel::vec(const GgufFile& g, const std::string& name) const {
  const Matrix m = matrix(g, name);
  return std::vector<double>(m.w.begin(), m.w.end());
}

ReferenceModel::ReferenceModel(const GgufFile& g, RefParams params) : p_(std::move(params)) {
  embd_ = matrix(g, "token_embd.weight");
  output_ = p_.tied ? embd_ : matrix(g, "output.weight");
  output_norm_ = vec(g, "output_norm.weight");
  for (int l = 0; l < p_.n_layers; ++l) {
    const auto n = [l](const char* what) { return fmt::format("blk.{}.{}", l, what); };
    Layer L;
    L.attn_norm = vec(g, n("attn_norm.weight"));
    L.ffn_norm = vec(g, n("ffn_norm.weight"));
    L.wq = matrix(g, n("attn_q.weight"));
    L.wk = matrix(g, n("attn_k.weight"));
    L.wv = matrix(g, n("attn_v.weight"));
    L.wo = matrix(g, n("attn_output.weight"));
    L.gate = matrix(g, n("ffn_gate.weight"));
    L.up = matrix(g, n("ffn_up.weight"));
    L.down = matrix(g, n("ffn_down.weight"));
    if (p_.qkv_bias) {
      L.bq = vec(g, n("attn_q.bias"));
      L.bk = vec(g, n("attn_k.bias"));
      L.bv = vec(g, n("attn_v.bias"));
    }
    if (p_.qk_norm) {
      L.q_norm = vec(g, n("attn_q_norm.weight"));
      L.k_norm = vec(g, n("attn_k_norm.weight"));
    }
    layers_.push_back(std::move(L));
  }
}

std::vector<double> ReferenceModel::forward(const std::vector<int32_t>& tokens) const {
  const int E = p_.n_embd, H = p_.n_head, KVH = p_.n_kv_head, D = p_.head_dim;
  const auto n = static_cast<int64_t>(tokens.size());
  std::vector<double> logits(static_cast<size_t>(n * p_.vocab));
  // Keys and values of every layer and position: [layer][pos][kv_head * D].
  std::vector<std::vector<Vec>> keys(static_cast<size_t>(p_.n_layers)),
      values(static_cast<size_t>(p_.n_layers));

  // Rotates one head vector by the angles of position `pos`.
  const auto rope = [&](double* h, int64_t pos) {
    for (int i = 0; i < D / 2; ++i) {
      double inv_freq = std::pow(p_.rope_base, -2.0 * i / D);
      if (!p_.rope_divisors.empty()) inv_freq /= p_.rope_divisors[static_cast<size_t>(i)];
      const double a = static_cast<double>(pos) * inv_freq;
      const int i0 = p_.neox ? i : 2 * i;
      const int i1 = p_.neox ? i + D / 2 : 2 * i + 1;
      const double x0 = h[i0], x1 = h[i1];
      h[i0] = x0 * std::cos(a) - x1 * std::sin(a);
      h[i1] = x0 * std::sin(a) + x1 * std::cos(a);
    }
  };
  const auto head_norm = [&](double* h, const Vec& w) {
    double ss = 0;
    for (int i = 0; i < D; ++i) ss += h[i] * h[i];
    const double inv = 1.0 / std::sqrt(ss / D + p_.rms_eps);
    for (int i = 0; i < D; ++i) h[i] = h[i] * inv * w[static_cast<size_t>(i)];
  };

  Vec x(static_cast<size_t>(E)), xn, q, k, v, att(static_cast<size_t>(H * D)), o, g, u, d;
  for (int64_t pos = 0; pos < n; ++pos) {
    const float* e = embd_.w.data() + static_cast<int64_t>(tokens[static_cast<size_t>(pos)]) * E;
    for (int i = 0; i < E; ++i) x[static_cast<size_t>(i)] = e[i];
    for (int l = 0; l < p_.n_layers; ++l) {
      const Layer& L = layers_[static_cast<size_t>(l)];
      rmsnorm_into(x, L.attn_norm, p_.rms_eps, xn);
      matvec(L.wq, xn, q);
      matvec(L.wk, xn, k);
      matvec(L.wv, xn, v);
      if (p_.qkv_bias) {
        for (size_t i = 0; i < q.size(); ++i) q[i] += L.bq[i];
        for (size_t i = 0; i < k.size(); ++i) k[i] += L.bk[i];
        for (size_t i = 0; i < v.size(); ++i) v[i] += L.bv[i];
      }
      for (int h = 0; h < H; ++h) {
        if (p_.qk_norm) head_norm(q.data() + h * D, L.q_norm);
        rope(q.data() + h * D, pos);
      }
      for (int h = 0; h < KVH; ++h) {
        if (p_.qk_norm) head_norm(k.data() + h * D, L.k_norm);
        rope(k.data() + h * D, pos);
      }
      keys[static_cast<size_t>(l)].push_back(k);
      values[static_cast<size_t>(l)].push_back(v);

      // Causal attention over positions 0..pos; query head h reads KV head h / (H / KVH).
      for (int h = 0; h < H; ++h) {
        const int kvh = h / (H / KVH);
        Vec scores(static_cast<size_t>(pos + 1));
        double mx = -1e300;
        for (int64_t j = 0; j <= pos; ++j) {
          const Vec& kj = keys[static_cast<size_t>(l)][static_cast<size_t>(j)];
          double s = 0;
          for (int i = 0; i < D; ++i)
            s += q[static_cast<size_t>(h * D + i)] * kj[static_cast<size_t>(kvh * D + i)];
          s /= std::sqrt(static_cast<double>(D));
          scores[static_cast<size_t>(j)] = s;
          mx = std::max(mx, s);
        }
        double sum = 0;
        for (double& s : scores) sum += (s = std::exp(s - mx));
        for (int i = 0; i < D; ++i) {
          double acc = 0;
          for (int64_t j = 0; j <= pos; ++j)
            acc += scores[static_cast<size_t>(j)] / sum *
                   values[static_cast<size_t>(l)][static_cast<size_t>(j)]
                         [static_cast<size_t>(kvh * D + i)];
          att[static_cast<size_t>(h * D + i)] = acc;
        }
      }
      matvec(L.wo, att, o);
      for (int i = 0; i < E; ++i) x[static_cast<size_t>(i)] += o[static_cast<size_t>(i)];

      rmsnorm_into(x, L.ffn_norm, p_.rms_eps, xn);
      matvec(L.gate, xn, g);
      matvec(L.up, xn, u);
      for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      matvec(L.down, g, d);
      for (int i = 0; i < E; ++i) x[static_cast<size_t>(i)] += d[static_cast<size_t>(i)];
    }
    rmsnorm_into(x, output_norm_, p_.rms_eps, xn);
    Vec out;
    matvec(output_, xn, out);
    std::copy(out.begin(), out.end(), logits.begin() + pos * p_.vocab);
  }
  return logits;
}

}  // namespace tangram::testing
