// Synthetic models: writes a GGUF with seeded random weights for any supported architecture,
// shape and weight type, for tests and benchmarks. Weights are scaled so activations stay
// well-behaved (each matrix uniform with variance 1/fan_in, norm weights near 1) and logits
// have a spread of a few units, so argmax and softmax are not degenerate.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "gguf/ggml_type.h"
#include "model/config.h"

namespace tangram {

class GgufWriter;

enum class SynthRopeScaling {
  None,
  Llama3Keys,    // rope.scaling.type = "llama3" with factor / low / high / original keys
  Llama3Tensor,  // a rope_freqs.weight tensor only, as llama.cpp's converter writes it
};

struct SynthSpec {
  Arch arch = Arch::Llama;
  int n_layers = 2;
  int n_embd = 256;
  int n_ff = 512;
  int n_head = 8;
  int n_kv_head = 2;
  int head_dim = 32;
  int64_t vocab = 512;
  int64_t ctx = 256;
  double rope_base = 10000.0;
  // Type of every matrix (token_embd and output included); norms and biases stay F32. A
  // matrix whose width is not a multiple of the type's block falls back to Q8_0, then F16.
  GgmlType weight_type = GgmlType::F32;
  // Q4_K_M-like mix instead of weight_type: Q4_K, with attn_v, ffn_down and output in Q6_K.
  bool q4_k_m_mix = false;
  uint64_t seed = 1;
  bool tied_output = false;  // no output.weight
  SynthRopeScaling llama3_rope = SynthRopeScaling::None;
  double rope_scale_factor = 8.0;
  double rope_low_freq_factor = 1.0;
  double rope_high_freq_factor = 4.0;
  int64_t rope_original_context = 8192;
  // Writes the tokenizer metadata; none: a minimal SPM vocab (<unk>, <s>, </s>, 256 byte
  // tokens, then filler pieces up to `vocab`).
  std::function<void(GgufWriter&)> write_vocab;
};

// Named presets: "tiny-llama", "tiny-qwen2", "tiny-qwen3" (fast test shapes), and realistic
// attention shapes with a narrow MLP and small vocabulary: "qwen3-4b-attn", "llama3-8b-attn".
Result<SynthSpec> synth_preset(std::string_view name);
std::vector<std::string> synth_preset_names();

// Sets weight_type / q4_k_m_mix from a name: a GgmlType name ("f32", "q8_0", ...) or "q4_k_m".
Status synth_set_weight_type(SynthSpec& spec, std::string_view name);

// The type a matrix of `cols` columns gets under `spec` (mix, fallbacks). `role` is the
// tensor name without the "blk.N." prefix, e.g. "attn_v.weight", "output.weight".
GgmlType synth_matrix_type(const SynthSpec& spec, std::string_view role, int64_t cols);

// The ModelConfig that reading the written file gives (for references in tests).
ModelConfig synth_config(const SynthSpec& spec);

// Generates and writes the model; n_threads <= 0: one per hardware thread.
Status write_synth_model(const SynthSpec& spec, const std::string& path, int n_threads = 0);

}  // namespace tangram
