// A plain reference forward pass for the model tests: straightforward loops, double
// accumulation, no threads, no SIMD, no KV cache. Weights are dequantised with
// dequantize_row once and multiplied as doubles. It shares no code with the engine's
// forward pass (its own RoPE, attention, norms), so the two can check each other.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"

namespace tangram::testing {

struct RefParams {
  int n_layers = 0;
  int n_embd = 0;
  int n_ff = 0;
  int n_head = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  int64_t vocab = 0;
  double rope_base = 10000.0;
  double rms_eps = 1e-5;
  bool neox = false;                  // rotate (x[i], x[i+d/2]) instead of (x[2i], x[2i+1])
  bool qkv_bias = false;              // add attn_{q,k,v}.bias
  bool qk_norm = false;               // RMSNorm each Q and K head with attn_{q,k}_norm
  bool tied = false;                  // output projection is token_embd
  std::vector<double> rope_divisors;  // [head_dim/2] Llama-3 divisors, empty for none
  // Emulate the decode kernels' activation rounding: before a product with a Q4_0 / Q8_0
  // weight the input is rounded through Q8_0 blocks, before Q4_K / Q6_K through Q8_K blocks
  // (ggml's convention for the integer dot products).
  bool round_activations = false;
};

// Llama-3 frequency divisors from the published formula (own implementation).
std::vector<double> reference_llama3_divisors(int head_dim, double base, double factor,
                                              double low_freq_factor, double high_freq_factor,
                                              double original_context);

class ReferenceModel {
 public:
  ReferenceModel(const GgufFile& gguf, RefParams params);
  // Logits [n][vocab] after feeding tokens[0..t] for every t, from scratch.
  std::vector<double> forward(const std::vector<int32_t>& tokens) const;
  RefParams& mutable_params() { return p_; }
  const RefParams& params() const { return p_; }

 private:
  struct Matrix {
    int64_t rows = 0, cols = 0;
    GgmlType type = GgmlType::F32;  // as stored in the file
    std::vector<float> w;           // [rows][cols], dequantised
  };
  struct Layer {
    std::vector<double> attn_norm, ffn_norm, bq, bk, bv, q_norm, k_norm;
    Matrix wq, wk, wv, wo, gate, up, down;
  };
  Matrix matrix(const GgufFile& g, const std::string& name) const;
  std::vector<double> vec(const GgufFile& g, const std::string& name) const;
  // out[rows] = W · x, with the input rounded as params().round_activations says.
  void matvec(const Matrix& m, const std::vector<double>& x, std::vector<double>& out) const;

  RefParams p_;
  Matrix embd_, output_;
  std::vector<double> output_norm_;
  std::vector<Layer> layers_;
};

}  // namespace tangram::testing
