// Model hyper-parameters read from GGUF metadata, for the decoder-only architectures Tangram
// runs: `llama` (Llama 2/3.x, Mistral, TinyLlama, TinyStories), `qwen2` (bias on Q, K, V) and
// `qwen3` (per-head RMSNorm on Q and K).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/pooling.h"

namespace tangram {

class GgufFile;

enum class Arch { Llama, Qwen2, Qwen3 };
std::string_view arch_name(Arch a);

// Which pairs of a head vector RoPE rotates.
enum class RopeLayout {
  Interleaved,  // (x[2i], x[2i+1]): llama.cpp's NORM mode, used by `llama`
  NeoX,         // (x[i], x[i + d/2]): used by `qwen2` and `qwen3`
};

enum class RopeScaling {
  None,
  Linear,  // positions divided by `rope_scale_factor`
  Llama3,  // per-frequency divisors (rope_freqs.weight tensor, or computed from the keys)
};

struct ModelConfig {
  Arch arch = Arch::Llama;
  int n_layers = 0;
  int n_embd = 0;
  int n_ff = 0;
  int n_head = 0;
  int n_kv_head = 0;
  int head_dim = 0;    // key/query head size (Qwen3: not n_embd / n_head)
  int head_dim_v = 0;  // value head size
  int64_t vocab = 0;   // rows of token_embd
  int64_t context_length = 0;
  float rms_eps = 1e-5f;

  RopeLayout rope_layout = RopeLayout::Interleaved;
  int rope_dim = 0;  // rotated leading dimensions of each head (<= head_dim, even)
  double rope_base = 10000.0;
  RopeScaling rope_scaling = RopeScaling::None;
  double rope_scale_factor = 1.0;
  // Llama-3 scaling parameters, used only when computing the per-frequency divisors from keys
  // (has_llama3_keys); a rope_freqs.weight tensor takes precedence.
  bool has_llama3_keys = false;
  double rope_low_freq_factor = 1.0;
  double rope_high_freq_factor = 4.0;
  int64_t rope_original_context = 8192;

  bool qkv_bias = false;     // qwen2
  bool qk_norm = false;      // qwen3
  bool tied_output = false;  // no output.weight: the output projection is token_embd
  // How the GGUF says its hidden states pool into an embedding (`<arch>.pooling_type`, set by
  // converters of embedding models); nullopt when the file does not say.
  std::optional<Pooling> pooling;

  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_kv_head * head_dim; }
  int v_dim() const { return n_kv_head * head_dim_v; }
  int attn_out_dim() const { return n_head * head_dim_v; }
};

// Reads and checks the hyper-parameters. Refuses unknown architectures by name and
// inconsistent values with a clear Error. Tensor shapes are checked by bind_weights().
Result<ModelConfig> read_model_config(const GgufFile& gguf);

// The per-frequency divisors of Llama-3 rope scaling, computed from the config's keys:
// out[rope_dim / 2]; frequency i becomes base^(-2i/rope_dim) / out[i].
std::vector<float> llama3_rope_freq_factors(const ModelConfig& c);

}  // namespace tangram
