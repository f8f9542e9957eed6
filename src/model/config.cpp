#include "model/config.h"

#include <cmath>
#include <numbers>
#include <optional>

#include "gguf/gguf_file.h"

namespace tangram {

namespace {

// Upper bounds that keep every derived size far from integer overflow.
constexpr int64_t kMaxDim = int64_t{1} << 20;
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxContext = int64_t{1} << 24;

struct ArchInfo {
  Arch arch;
  std::string_view name;
  RopeLayout layout;
  bool qkv_bias;
  bool qk_norm;
  float default_eps;
};

constexpr ArchInfo kArchs[] = {
    {Arch::Llama, "llama", RopeLayout::Interleaved, false, false, 1e-5f},
    {Arch::Qwen2, "qwen2", RopeLayout::NeoX, true, false, 1e-6f},
    {Arch::Qwen3, "qwen3", RopeLayout::NeoX, false, true, 1e-6f},
};

// Reads "<arch>.<suffix>" metadata with range checks.
class KeyReader {
 public:
  KeyReader(const GgufFile& g, std::string_view arch) : g_(g), prefix_(std::string(arch) + ".") {}

  std::string key(std::string_view suffix) const { return prefix_ + std::string(suffix); }

  Result<int64_t> required_int(std::string_view suffix, int64_t lo, int64_t hi) const {
    const std::string k = key(suffix);
    if (g_.find(k) == nullptr) return make_error("{}: missing metadata key '{}'", g_.path(), k);
    return optional_int(suffix, 0, lo, hi);
  }
  Result<int64_t> optional_int(std::string_view suffix, int64_t fallback, int64_t lo,
                               int64_t hi) const {
    const std::string k = key(suffix);
    if (g_.find(k) == nullptr) return fallback;
    const auto v = g_.get_int(k);
    if (!v) return make_error("{}: metadata key '{}' is not an integer", g_.path(), k);
    return check(k, *v, lo, hi);
  }
  Result<double> optional_float(std::string_view suffix, double fallback, double lo,
                                double hi) const {
    const std::string k = key(suffix);
    if (g_.find(k) == nullptr) return fallback;
    const auto v = g_.get_float(k);
    if (!v) return make_error("{}: metadata key '{}' is not a number", g_.path(), k);
    if (!std::isfinite(*v) || *v < lo || *v > hi)
      return make_error("{}: metadata key '{}' = {} is outside [{}, {}]", g_.path(), k, *v, lo, hi);
    return *v;
  }
  bool has(std::string_view suffix) const { return g_.find(key(suffix)) != nullptr; }
  std::optional<std::string> string(std::string_view suffix) const {
    return g_.get_string(key(suffix));
  }

 private:
  Result<int64_t> check(const std::string& k, int64_t v, int64_t lo, int64_t hi) const {
    if (v < lo || v > hi)
      return make_error("{}: metadata key '{}' = {} is outside [{}, {}]", g_.path(), k, v, lo, hi);
    return v;
  }
  const GgufFile& g_;
  std::string prefix_;
};

}  // namespace

std::string_view arch_name(Arch a) {
  for (const auto& info : kArchs)
    if (info.arch == a) return info.name;
  return "?";
}

Result<ModelConfig> read_model_config(const GgufFile& g) {
  const auto arch_str = g.get_string("general.architecture");
  if (!arch_str) return make_error("{}: missing metadata key 'general.architecture'", g.path());
  const ArchInfo* info = nullptr;
  for (const auto& a : kArchs)
    if (a.name == *arch_str) info = &a;
  if (info == nullptr)
    return make_error("{}: unsupported architecture '{}' (supported: llama, qwen2, qwen3)",
                      g.path(), *arch_str);

  const KeyReader r(g, info->name);
  ModelConfig c;
  c.arch = info->arch;
  c.rope_layout = info->layout;
  c.qkv_bias = info->qkv_bias;
  c.qk_norm = info->qk_norm;

  TG_ASSIGN(const int64_t n_layers, r.required_int("block_count", 1, kMaxLayers));
  TG_ASSIGN(const int64_t n_embd, r.required_int("embedding_length", 1, kMaxDim));
  TG_ASSIGN(const int64_t n_ff, r.required_int("feed_forward_length", 1, kMaxDim));
  TG_ASSIGN(const int64_t n_head, r.required_int("attention.head_count", 1, kMaxDim));
  TG_ASSIGN(const int64_t n_kv_head, r.optional_int("attention.head_count_kv", n_head, 1, n_head));
  if (n_head % n_kv_head != 0)
    return make_error("{}: head_count {} is not a multiple of head_count_kv {}", g.path(), n_head,
                      n_kv_head);
  const int64_t default_head_dim = n_embd / n_head;
  TG_ASSIGN(const int64_t head_dim,
            r.optional_int("attention.key_length", default_head_dim, 1, kMaxDim));
  TG_ASSIGN(const int64_t head_dim_v,
            r.optional_int("attention.value_length", head_dim, 1, kMaxDim));
  if (head_dim == 0 || n_head * head_dim > kMaxDim || n_head * head_dim_v > kMaxDim)
    return make_error("{}: invalid head size {} for {} heads", g.path(), head_dim, n_head);
  TG_ASSIGN(const int64_t rope_dim, r.optional_int("rope.dimension_count", head_dim, 2, head_dim));
  if (rope_dim % 2 != 0)
    return make_error("{}: rope.dimension_count {} is odd", g.path(), rope_dim);
  TG_ASSIGN(const double rope_base, r.optional_float("rope.freq_base", 10000.0, 1.0, 1e12));
  TG_ASSIGN(const double eps, r.optional_float("attention.layer_norm_rms_epsilon",
                                               static_cast<double>(info->default_eps), 0.0, 1.0));
  TG_ASSIGN(const int64_t ctx, r.required_int("context_length", 1, kMaxContext));

  c.n_layers = static_cast<int>(n_layers);
  c.n_embd = static_cast<int>(n_embd);
  c.n_ff = static_cast<int>(n_ff);
  c.n_head = static_cast<int>(n_head);
  c.n_kv_head = static_cast<int>(n_kv_head);
  c.head_dim = static_cast<int>(head_dim);
  c.head_dim_v = static_cast<int>(head_dim_v);
  c.rope_dim = static_cast<int>(rope_dim);
  c.rope_base = rope_base;
  c.rms_eps = static_cast<float>(eps);
  c.context_length = ctx;

  // Rope scaling. A rope_freqs.weight tensor (as llama.cpp's converter writes for Llama 3.1+)
  // means Llama-3 scaling whatever the keys say.
  const std::string type = r.string("rope.scaling.type").value_or("none");
  TG_ASSIGN(const double factor, r.optional_float("rope.scaling.factor", 1.0, 1e-6, 1e6));
  if (type == "none") {
    c.rope_scaling = RopeScaling::None;
  } else if (type == "linear") {
    c.rope_scaling = RopeScaling::Linear;
    c.rope_scale_factor = factor;
  } else if (type == "llama3") {
    c.rope_scaling = RopeScaling::Llama3;
    c.rope_scale_factor = factor;
    TG_ASSIGN(c.rope_low_freq_factor,
              r.optional_float("rope.scaling.low_freq_factor", 1.0, 1e-6, 1e6));
    TG_ASSIGN(c.rope_high_freq_factor,
              r.optional_float("rope.scaling.high_freq_factor", 4.0, 1e-6, 1e6));
    if (!(c.rope_high_freq_factor > c.rope_low_freq_factor))
      return make_error("{}: llama3 rope scaling needs high_freq_factor > low_freq_factor",
                        g.path());
    if (!r.has("rope.scaling.original_context_length"))
      return make_error("{}: llama3 rope scaling needs '{}'", g.path(),
                        r.key("rope.scaling.original_context_length"));
    TG_ASSIGN(c.rope_original_context,
              r.optional_int("rope.scaling.original_context_length", 0, 1, kMaxContext));
    c.has_llama3_keys = true;
  } else {
    return make_error("{}: unsupported rope scaling type '{}' (supported: none, linear, llama3)",
                      g.path(), type);
  }
  if (g.find_tensor("rope_freqs.weight") != nullptr) c.rope_scaling = RopeScaling::Llama3;

  const GgufTensorInfo* embd = g.find_tensor("token_embd.weight");
  if (embd == nullptr) return make_error("{}: missing tensor 'token_embd.weight'", g.path());
  c.vocab = embd->ne[1];
  if (c.vocab < 1 || c.vocab > (int64_t{1} << 31))
    return make_error("{}: token_embd.weight has an invalid vocabulary size {}", g.path(), c.vocab);
  c.tied_output = g.find_tensor("output.weight") == nullptr;
  if (r.has("pooling_type")) {
    TG_ASSIGN(const int64_t pooling, r.optional_int("pooling_type", 0, 0, 4));
    c.pooling = static_cast<Pooling>(pooling);
  }
  return c;
}

std::vector<float> llama3_rope_freq_factors(const ModelConfig& c) {
  // Wavelengths shorter than original_ctx / high_freq_factor keep their frequency, longer than
  // original_ctx / low_freq_factor are divided by `factor`, and those between blend smoothly.
  const int half = c.rope_dim / 2;
  std::vector<float> out(static_cast<size_t>(half), 1.0f);
  const double old_ctx = static_cast<double>(c.rope_original_context);
  const double low_wavelen = old_ctx / c.rope_low_freq_factor;
  const double high_wavelen = old_ctx / c.rope_high_freq_factor;
  for (int i = 0; i < half; ++i) {
    const double freq = std::pow(c.rope_base, -2.0 * i / c.rope_dim);
    const double wavelen = 2.0 * std::numbers::pi / freq;
    double divisor = 1.0;
    if (wavelen > low_wavelen) {
      divisor = c.rope_scale_factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (old_ctx / wavelen - c.rope_low_freq_factor) /
                            (c.rope_high_freq_factor - c.rope_low_freq_factor);
      divisor = 1.0 / ((1.0 - smooth) / c.rope_scale_factor + smooth);
    }
    out[static_cast<size_t>(i)] = static_cast<float>(divisor);
  }
  return out;
}

}  // namespace tangram
