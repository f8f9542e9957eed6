#include "synth/synth.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <new>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/thread_pool.h"
#include "gguf/gguf_file.h"
#include "kernels/quant.h"

namespace tangram {

namespace {

// SplitMix64: a small, fast generator with good statistical quality; each row of each
// tensor gets its own stream so generation can run in parallel and stay reproducible.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (char ch : s) {
    h ^= static_cast<uint8_t>(ch);
    h *= 0x100000001B3ull;
  }
  return h;
}

// Uniform in [-1, 1).
float uniform_pm1(uint64_t& state) {
  return static_cast<float>(splitmix64(state) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

float rms_eps_for(Arch a) { return a == Arch::Llama ? 1e-5f : 1e-6f; }

// How the values of one tensor are drawn: center + amplitude * U(-1, 1).
struct Fill {
  float center = 0.0f;
  float amplitude = 0.0f;
};

// Uniform with variance gain² / fan_in (amplitude = gain * sqrt(3 / fan_in)).
Fill scaled(int64_t fan_in, double gain = 1.0) {
  return {0.0f, static_cast<float>(gain * std::sqrt(3.0 / static_cast<double>(fan_in)))};
}

std::string base26(int64_t i) {
  std::string s;
  do {
    s.insert(s.begin(), static_cast<char>('a' + i % 26));
    i = i / 26 - 1;
  } while (i >= 0);
  return s;
}

void write_default_vocab(GgufWriter& w, int64_t vocab) {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;  // 1 normal, 2 unknown, 3 control, 6 byte
  tokens.reserve(static_cast<size_t>(vocab));
  const auto push = [&](std::string t, float score, int32_t type) {
    tokens.push_back(std::move(t));
    scores.push_back(score);
    types.push_back(type);
  };
  push("<unk>", 0.0f, 2);
  push("<s>", 0.0f, 3);
  push("</s>", 0.0f, 3);
  for (int b = 0; b < 256; ++b) push(fmt::format("<0x{:02X}>", b), 0.0f, 6);
  for (int64_t i = 0; static_cast<int64_t>(tokens.size()) < vocab; ++i)
    push("\xE2\x96\x81" + base26(i), -static_cast<float>(i), 1);  // "▁" + letters
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_f32_array("tokenizer.ggml.scores", scores);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
}

class SynthWriter {
 public:
  SynthWriter(const SynthSpec& spec, int n_threads) : spec_(spec), pool_(n_threads) {}

  // A (cols, rows) matrix, or a [cols] vector, of the given type drawn from `fill`.
  Status add(const std::string& name, GgmlType type, int64_t cols, int64_t rows, Fill fill,
             bool is_vector) {
    const size_t row_bytes = ggml_row_bytes(type, cols);
    std::vector<uint8_t> data;
    try {
      data.resize(row_bytes * static_cast<size_t>(rows));
    } catch (const std::bad_alloc&) {
      return make_error("synth: out of memory for tensor '{}'", name);
    }
    const uint64_t tensor_seed = spec_.seed * 0x9E3779B97F4A7C15ull ^ fnv1a(name);
    std::vector<std::vector<float>> scratch(static_cast<size_t>(pool_.size()));
    pool_.parallel_for(
        rows,
        [&](int64_t begin, int64_t end, int thread) {
          std::vector<float>& row = scratch[static_cast<size_t>(thread)];
          row.resize(static_cast<size_t>(cols));
          for (int64_t r = begin; r < end; ++r) {
            uint64_t state = tensor_seed + static_cast<uint64_t>(r) * 0xD1B54A32D192ED03ull;
            for (float& x : row) x = fill.center + fill.amplitude * uniform_pm1(state);
            quantize_row(type, row.data(), data.data() + static_cast<size_t>(r) * row_bytes, cols);
          }
        },
        16);
    const std::vector<int64_t> ne =
        is_vector ? std::vector<int64_t>{cols} : std::vector<int64_t>{cols, rows};
    return w_.add_tensor(name, type, ne, data.data(), data.size());
  }

  Status add_vector(const std::string& name, int64_t n, Fill fill) {
    return add(name, GgmlType::F32, n, 1, fill, true);
  }
  Status add_vector(const std::string& name, const std::vector<float>& values) {
    return w_.add_tensor(name, GgmlType::F32, {static_cast<int64_t>(values.size())}, values.data(),
                         values.size() * sizeof(float));
  }
  Status add_matrix(const std::string& name, std::string_view role, int64_t cols, int64_t rows,
                    Fill fill) {
    return add(name, synth_matrix_type(spec_, role, cols), cols, rows, fill, false);
  }

  GgufWriter& writer() { return w_; }

 private:
  const SynthSpec& spec_;
  ThreadPool pool_;
  GgufWriter w_;
};

Status check_spec(const SynthSpec& s) {
  if (s.n_layers < 1 || s.n_embd < 1 || s.n_ff < 1 || s.n_head < 1 || s.n_kv_head < 1 ||
      s.head_dim < 2 || s.vocab < 1 || s.ctx < 1)
    return make_error("synth: every dimension must be positive");
  if (s.n_head % s.n_kv_head != 0)
    return make_error("synth: n_head {} is not a multiple of n_kv_head {}", s.n_head, s.n_kv_head);
  if (s.head_dim % 2 != 0) return make_error("synth: head_dim {} is odd", s.head_dim);
  if (!s.write_vocab && s.vocab < 259)
    return make_error("synth: the default vocabulary needs vocab >= 259, got {}", s.vocab);
  if (s.weight_type == GgmlType::Q8_K)
    return make_error("synth: Q8_K is an activation type, not a weight type");
  return Status::Ok();
}

}  // namespace

GgmlType synth_matrix_type(const SynthSpec& spec, std::string_view role, int64_t cols) {
  GgmlType t = spec.weight_type;
  if (spec.q4_k_m_mix) {
    const bool more_bits =
        role == "attn_v.weight" || role == "ffn_down.weight" || role == "output.weight";
    t = more_bits ? GgmlType::Q6_K : GgmlType::Q4_K;
  }
  if (cols % ggml_type_info(t).block_elems != 0)
    t = cols % 32 == 0 ? GgmlType::Q8_0 : GgmlType::F16;
  if (t == GgmlType::Q8_0 && cols % 32 != 0) t = GgmlType::F16;
  return t;
}

ModelConfig synth_config(const SynthSpec& s) {
  ModelConfig c;
  c.arch = s.arch;
  c.n_layers = s.n_layers;
  c.n_embd = s.n_embd;
  c.n_ff = s.n_ff;
  c.n_head = s.n_head;
  c.n_kv_head = s.n_kv_head;
  c.head_dim = s.head_dim;
  c.head_dim_v = s.head_dim;
  c.vocab = s.vocab;
  c.context_length = s.ctx;
  c.rms_eps = rms_eps_for(s.arch);
  c.rope_layout = s.arch == Arch::Llama ? RopeLayout::Interleaved : RopeLayout::NeoX;
  c.rope_dim = s.head_dim;
  c.rope_base = s.rope_base;
  if (s.llama3_rope != SynthRopeScaling::None) {
    c.rope_scaling = RopeScaling::Llama3;
    c.rope_scale_factor = s.rope_scale_factor;
    c.rope_low_freq_factor = s.rope_low_freq_factor;
    c.rope_high_freq_factor = s.rope_high_freq_factor;
    c.rope_original_context = s.rope_original_context;
    c.has_llama3_keys = s.llama3_rope == SynthRopeScaling::Llama3Keys;
  }
  c.qkv_bias = s.arch == Arch::Qwen2;
  c.qk_norm = s.arch == Arch::Qwen3;
  c.tied_output = s.tied_output;
  return c;
}

Result<SynthSpec> synth_preset(std::string_view name) {
  SynthSpec s;
  if (name == "tiny-llama") {
    s.arch = Arch::Llama;
  } else if (name == "tiny-qwen2") {
    s.arch = Arch::Qwen2;
    s.rope_base = 1e6;
  } else if (name == "tiny-qwen3") {
    s.arch = Arch::Qwen3;
    s.head_dim = 64;  // q_dim 512 != n_embd 256, as in real Qwen3
    s.rope_base = 1e6;
  } else if (name == "qwen3-4b-attn") {
    s.arch = Arch::Qwen3;
    s.n_layers = 36;
    s.n_embd = 2560;
    s.n_ff = 2048;  // narrow MLP: attention-shaped work dominates, and it runs on 2 cores
    s.n_head = 32;
    s.n_kv_head = 8;
    s.head_dim = 128;
    s.vocab = 4096;
    s.ctx = 8192;
    s.rope_base = 1e6;
  } else if (name == "llama3-8b-attn") {
    s.arch = Arch::Llama;
    s.n_layers = 32;
    s.n_embd = 4096;
    s.n_ff = 2048;
    s.n_head = 32;
    s.n_kv_head = 8;
    s.head_dim = 128;
    s.vocab = 4096;
    s.ctx = 8192;
    s.rope_base = 500000.0;
    s.llama3_rope = SynthRopeScaling::Llama3Tensor;
  } else {
    return make_error("unknown synthetic model preset '{}' (known: {})", name,
                      fmt::join(synth_preset_names(), ", "));
  }
  return s;
}

std::vector<std::string> synth_preset_names() {
  return {"tiny-llama", "tiny-qwen2", "tiny-qwen3", "qwen3-4b-attn", "llama3-8b-attn"};
}

Status synth_set_weight_type(SynthSpec& spec, std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (lower == "q4_k_m") {
    spec.q4_k_m_mix = true;
    return Status::Ok();
  }
  const auto t = ggml_type_from_name(name);
  if (!t || *t == GgmlType::Q8_K)
    return make_error("unknown weight type '{}' (f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, q4_k_m)",
                      name);
  spec.weight_type = *t;
  spec.q4_k_m_mix = false;
  return Status::Ok();
}

Status write_synth_model(const SynthSpec& spec, const std::string& path, int n_threads) {
  TG_TRY(check_spec(spec));
  const ModelConfig c = synth_config(spec);
  SynthWriter sw(spec, n_threads);
  GgufWriter& w = sw.writer();

  const std::string a(arch_name(spec.arch));
  w.set_string("general.architecture", a);
  w.set_string("general.name", fmt::format("synthetic {} (seed {})", a, spec.seed));
  w.set_u32(a + ".block_count", static_cast<uint32_t>(c.n_layers));
  w.set_u32(a + ".context_length", static_cast<uint32_t>(c.context_length));
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(c.n_embd));
  w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(c.n_ff));
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(c.n_head));
  w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(c.n_kv_head));
  w.set_u32(a + ".attention.key_length", static_cast<uint32_t>(c.head_dim));
  w.set_u32(a + ".attention.value_length", static_cast<uint32_t>(c.head_dim_v));
  w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(c.rope_dim));
  w.set_f32(a + ".rope.freq_base", static_cast<float>(c.rope_base));
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", c.rms_eps);
  if (spec.llama3_rope == SynthRopeScaling::Llama3Keys) {
    w.set_string(a + ".rope.scaling.type", "llama3");
    w.set_f32(a + ".rope.scaling.factor", static_cast<float>(spec.rope_scale_factor));
    w.set_f32(a + ".rope.scaling.low_freq_factor", static_cast<float>(spec.rope_low_freq_factor));
    w.set_f32(a + ".rope.scaling.high_freq_factor", static_cast<float>(spec.rope_high_freq_factor));
    w.set_u32(a + ".rope.scaling.original_context_length",
              static_cast<uint32_t>(spec.rope_original_context));
  }
  if (spec.write_vocab) {
    spec.write_vocab(w);
  } else {
    write_default_vocab(w, spec.vocab);
  }

  // Embedding and output rows have variance 4 / n_embd: with the final norm's unit-RMS input,
  // logits get a standard deviation near 2.
  const Fill embd = scaled(c.n_embd, 2.0);
  const Fill norm{1.0f, 0.2f};
  TG_TRY(sw.add_matrix("token_embd.weight", "token_embd.weight", c.n_embd, c.vocab, embd));
  TG_TRY(sw.add_vector("output_norm.weight", c.n_embd, norm));
  if (!spec.tied_output)
    TG_TRY(sw.add_matrix("output.weight", "output.weight", c.n_embd, c.vocab, embd));
  if (spec.llama3_rope == SynthRopeScaling::Llama3Tensor) {
    ModelConfig keyed = c;
    keyed.has_llama3_keys = true;
    TG_TRY(sw.add_vector("rope_freqs.weight", llama3_rope_freq_factors(keyed)));
  }
  for (int l = 0; l < c.n_layers; ++l) {
    const auto name = [l](std::string_view role) { return fmt::format("blk.{}.{}", l, role); };
    TG_TRY(sw.add_vector(name("attn_norm.weight"), c.n_embd, norm));
    TG_TRY(sw.add_matrix(name("attn_q.weight"), "attn_q.weight", c.n_embd, c.q_dim(),
                         scaled(c.n_embd)));
    TG_TRY(sw.add_matrix(name("attn_k.weight"), "attn_k.weight", c.n_embd, c.kv_dim(),
                         scaled(c.n_embd)));
    TG_TRY(sw.add_matrix(name("attn_v.weight"), "attn_v.weight", c.n_embd, c.v_dim(),
                         scaled(c.n_embd)));
    if (c.qkv_bias) {
      const Fill bias{0.0f, 0.5f};
      TG_TRY(sw.add_vector(name("attn_q.bias"), c.q_dim(), bias));
      TG_TRY(sw.add_vector(name("attn_k.bias"), c.kv_dim(), bias));
      TG_TRY(sw.add_vector(name("attn_v.bias"), c.v_dim(), bias));
    }
    if (c.qk_norm) {
      TG_TRY(sw.add_vector(name("attn_q_norm.weight"), c.head_dim, norm));
      TG_TRY(sw.add_vector(name("attn_k_norm.weight"), c.head_dim, norm));
    }
    TG_TRY(sw.add_matrix(name("attn_output.weight"), "attn_output.weight", c.attn_out_dim(),
                         c.n_embd, scaled(c.attn_out_dim())));
    TG_TRY(sw.add_vector(name("ffn_norm.weight"), c.n_embd, norm));
    TG_TRY(sw.add_matrix(name("ffn_gate.weight"), "ffn_gate.weight", c.n_embd, c.n_ff,
                         scaled(c.n_embd)));
    TG_TRY(
        sw.add_matrix(name("ffn_up.weight"), "ffn_up.weight", c.n_embd, c.n_ff, scaled(c.n_embd)));
    TG_TRY(sw.add_matrix(name("ffn_down.weight"), "ffn_down.weight", c.n_ff, c.n_embd,
                         scaled(c.n_ff)));
  }
  return w.write(path);
}

}  // namespace tangram
