// Binds the GGUF tensors of a decoder-only model to named fields, checking every shape against
// the ModelConfig. Matrices stay in the file's mapping (any weight type, read in place by the
// kernels); the small vectors (norms, biases, rope factors) are widened to float once.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "gguf/tensor_view.h"
#include "model/config.h"

namespace tangram {

class GgufFile;

// Matrix shapes are given as ggml ne = (cols, rows): y[rows] = W · x[cols].
struct LayerWeights {
  std::vector<float> attn_norm;       // [n_embd]
  TensorView wq;                      // (n_embd, n_head * head_dim)
  TensorView wk;                      // (n_embd, n_kv_head * head_dim)
  TensorView wv;                      // (n_embd, n_kv_head * head_dim_v)
  TensorView wo;                      // (n_head * head_dim_v, n_embd)
  std::vector<float> bq, bk, bv;      // qwen2 only: [q_dim], [kv_dim], [v_dim]
  std::vector<float> q_norm, k_norm;  // qwen3 only: [head_dim], shared by all heads
  std::vector<float> ffn_norm;        // [n_embd]
  TensorView w_gate;                  // (n_embd, n_ff)
  TensorView w_up;                    // (n_embd, n_ff)
  TensorView w_down;                  // (n_ff, n_embd)
};

struct ModelWeights {
  TensorView token_embd;                 // (n_embd, vocab)
  TensorView output;                     // (n_embd, vocab); token_embd when tied
  std::vector<float> output_norm;        // [n_embd]
  std::vector<float> rope_freq_factors;  // [rope_dim / 2] divisors; empty without Llama-3 scaling
  std::vector<LayerWeights> layers;      // [n_layers]
};

Result<ModelWeights> bind_weights(const GgufFile& gguf, const ModelConfig& config);

// The tensors read only as matmul weights (attention and feed-forward matrices, the output
// matrix when it is not tied to token_embd): the ones the loader may rewrite into the layout
// matmul prefers (interleave_for_matmul). Never token_embd, whose rows are looked up.
std::vector<std::string> matmul_weight_names(const ModelConfig& config);

}  // namespace tangram
