#include "model/weights.h"

#include <fmt/format.h>

#include "gguf/gguf_file.h"
#include "kernels/quant.h"

namespace tangram {

namespace {

std::string shape_str(const GgufTensorInfo& t) {
  std::string s = "[";
  for (int d = 0; d < std::max(t.n_dims, 1); ++d)
    s += fmt::format("{}{}", d ? ", " : "", t.ne[static_cast<size_t>(d)]);
  return s + "]";
}

class Binder {
 public:
  explicit Binder(const GgufFile& g) : g_(g) {}

  // A (cols, rows) matrix in any weight type.
  Result<TensorView> matrix(const std::string& name, int64_t cols, int64_t rows) const {
    const GgufTensorInfo* t = g_.find_tensor(name);
    if (t == nullptr) return make_error("{}: missing tensor '{}'", g_.path(), name);
    if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != 1 || t->ne[3] != 1)
      return make_error("{}: tensor '{}' has shape {}, expected [{}, {}]", g_.path(), name,
                        shape_str(*t), cols, rows);
    if (t->type == GgmlType::Q8_K)
      return make_error("{}: tensor '{}' has type Q8_K, which is not a weight type", g_.path(),
                        name);
    if (cols % ggml_type_info(t->type).block_elems != 0)
      return make_error("{}: tensor '{}' has {} columns, not a multiple of the {} block size",
                        g_.path(), name, cols, ggml_type_name(t->type));
    TensorView v = g_.view(*t);
    if (v.empty() || v.nbytes < v.row_bytes() * static_cast<size_t>(rows))
      return make_error("{}: tensor '{}' data is out of bounds", g_.path(), name);
    return v;
  }

  // A 1-D tensor of n elements, widened to float.
  Result<std::vector<float>> vector(const std::string& name, int64_t n) const {
    const GgufTensorInfo* t = g_.find_tensor(name);
    if (t == nullptr) return make_error("{}: missing tensor '{}'", g_.path(), name);
    if (t->ne[0] != n || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1)
      return make_error("{}: tensor '{}' has shape {}, expected [{}]", g_.path(), name,
                        shape_str(*t), n);
    if (t->type == GgmlType::Q8_K || n % ggml_type_info(t->type).block_elems != 0)
      return make_error("{}: tensor '{}' has unusable type {} for a vector", g_.path(), name,
                        ggml_type_name(t->type));
    const TensorView v = g_.view(*t);
    if (v.empty() || v.nbytes < v.row_bytes())
      return make_error("{}: tensor '{}' data is out of bounds", g_.path(), name);
    std::vector<float> out(static_cast<size_t>(n));
    dequantize_row(t->type, v.data, out.data(), n);
    return out;
  }

 private:
  const GgufFile& g_;
};

}  // namespace

Result<ModelWeights> bind_weights(const GgufFile& g, const ModelConfig& c) {
  const Binder b(g);
  ModelWeights w;
  TG_ASSIGN(w.token_embd, b.matrix("token_embd.weight", c.n_embd, c.vocab));
  if (c.tied_output) {
    w.output = w.token_embd;
  } else {
    TG_ASSIGN(w.output, b.matrix("output.weight", c.n_embd, c.vocab));
  }
  TG_ASSIGN(w.output_norm, b.vector("output_norm.weight", c.n_embd));
  if (c.rope_scaling == RopeScaling::Llama3) {
    if (g.find_tensor("rope_freqs.weight") != nullptr) {
      TG_ASSIGN(w.rope_freq_factors, b.vector("rope_freqs.weight", c.rope_dim / 2));
      for (float f : w.rope_freq_factors)
        if (!(f > 0.0f))
          return make_error("{}: rope_freqs.weight holds a non-positive factor", g.path());
    } else {
      w.rope_freq_factors = llama3_rope_freq_factors(c);
    }
  }

  w.layers.resize(static_cast<size_t>(c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights& L = w.layers[static_cast<size_t>(l)];
    const auto name = [l](const char* what) { return fmt::format("blk.{}.{}", l, what); };
    TG_ASSIGN(L.attn_norm, b.vector(name("attn_norm.weight"), c.n_embd));
    TG_ASSIGN(L.wq, b.matrix(name("attn_q.weight"), c.n_embd, c.q_dim()));
    TG_ASSIGN(L.wk, b.matrix(name("attn_k.weight"), c.n_embd, c.kv_dim()));
    TG_ASSIGN(L.wv, b.matrix(name("attn_v.weight"), c.n_embd, c.v_dim()));
    TG_ASSIGN(L.wo, b.matrix(name("attn_output.weight"), c.attn_out_dim(), c.n_embd));
    if (c.qkv_bias) {
      TG_ASSIGN(L.bq, b.vector(name("attn_q.bias"), c.q_dim()));
      TG_ASSIGN(L.bk, b.vector(name("attn_k.bias"), c.kv_dim()));
      TG_ASSIGN(L.bv, b.vector(name("attn_v.bias"), c.v_dim()));
    }
    if (c.qk_norm) {
      TG_ASSIGN(L.q_norm, b.vector(name("attn_q_norm.weight"), c.head_dim));
      TG_ASSIGN(L.k_norm, b.vector(name("attn_k_norm.weight"), c.head_dim));
    }
    TG_ASSIGN(L.ffn_norm, b.vector(name("ffn_norm.weight"), c.n_embd));
    TG_ASSIGN(L.w_gate, b.matrix(name("ffn_gate.weight"), c.n_embd, c.n_ff));
    TG_ASSIGN(L.w_up, b.matrix(name("ffn_up.weight"), c.n_embd, c.n_ff));
    TG_ASSIGN(L.w_down, b.matrix(name("ffn_down.weight"), c.n_ff, c.n_embd));
  }
  return w;
}

std::vector<std::string> matmul_weight_names(const ModelConfig& c) {
  std::vector<std::string> names;
  if (!c.tied_output) names.emplace_back("output.weight");
  for (int l = 0; l < c.n_layers; ++l)
    for (const char* what :
         {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})
      names.push_back(fmt::format("blk.{}.{}.weight", l, what));
  return names;
}

}  // namespace tangram
