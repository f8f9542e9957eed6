#include "model/model.h"

#include <algorithm>
#include <new>

#include "gguf/gguf_file.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kv/contiguous_kv_cache.h"

namespace tangram {

Model::~Model() = default;

Result<std::unique_ptr<Model>> Model::load(const std::string& path, const ModelOptions& options) {
  TG_ASSIGN(auto gguf, GgufFile::open(path));
  TG_ASSIGN(ModelConfig config, read_model_config(*gguf));
  TG_ASSIGN(ModelWeights weights, bind_weights(*gguf, config));
  std::unique_ptr<Model> m(new Model());
  m->gguf_ = std::move(gguf);
  m->config_ = config;
  m->weights_ = std::move(weights);
  m->rope_ = Rope(m->config_, m->weights_.rope_freq_factors);
  m->max_batch_ = options.max_batch > 0 ? options.max_batch : ModelOptions{}.max_batch;
  return m;
}

KvShape Model::kv_shape() const {
  return KvShape{config_.n_layers, config_.n_head, config_.n_kv_head, config_.head_dim,
                 config_.head_dim_v};
}

std::unique_ptr<KvCache> Model::new_cache(int64_t max_tokens, KvType type) const {
  const int64_t cap = max_tokens <= 0 ? config_.context_length
                                      : std::min(max_tokens, config_.context_length);
  return std::make_unique<ContiguousKvCache>(kv_shape(), cap, type);
}

Status Model::ensure_buffers(int64_t m) {
  if (m <= buf_tokens_) return Status::Ok();
  try {
    grow_buffers(m);
  } catch (const std::bad_alloc&) {
    buf_tokens_ = 0;  // sizes are now unknown; the next call starts over
    return make_error("forward: out of memory for the working buffers of {} tokens", m);
  }
  return Status::Ok();
}

void Model::grow_buffers(int64_t m) {
  const auto sz = [m](int64_t per_token) { return static_cast<size_t>(m * per_token); };
  const ModelConfig& c = config_;
  x_.resize(sz(c.n_embd));
  xn_.resize(sz(c.n_embd));
  q_.resize(sz(c.q_dim()));
  k_.resize(sz(c.kv_dim()));
  v_.resize(sz(c.v_dim()));
  attn_.resize(sz(c.attn_out_dim()));
  proj_.resize(sz(c.n_embd));
  gate_.resize(sz(c.n_ff));
  up_.resize(sz(c.n_ff));
  rope_cos_.resize(sz(rope_.half()));
  rope_sin_.resize(sz(rope_.half()));
  buf_tokens_ = m;
}

Status Model::forward(KvCache& cache, const int32_t* tokens, int64_t n, int64_t pos0,
                      float* logits, ThreadPool& pool, bool all_logits) {
  if (n < 1 || tokens == nullptr) return make_error("forward: no tokens given");
  const KvShape want = kv_shape();
  const KvShape& got = cache.shape();
  if (got.n_layers != want.n_layers || got.n_head != want.n_head ||
      got.n_kv_head != want.n_kv_head || got.head_dim != want.head_dim ||
      got.head_dim_v != want.head_dim_v)
    return make_error("forward: the KV cache was made for a model of another shape");
  if (pos0 != cache.n_positions())
    return make_error("forward: position {} does not continue the cache, which holds {}", pos0,
                      cache.n_positions());
  // Sizes are checked before any token is read; written as subtractions so huge n cannot
  // overflow.
  if (n > config_.context_length - pos0)
    return make_error("context overflow: {} + {} tokens exceed the model's context of {}", pos0,
                      n, config_.context_length);
  if (n > cache.capacity() - pos0)
    return make_error("context overflow: {} + {} tokens exceed the KV cache capacity of {}", pos0,
                      n, cache.capacity());
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= config_.vocab)
      return make_error("forward: token id {} at index {} is outside the vocabulary [0, {})",
                        tokens[i], i, config_.vocab);
  TG_TRY(cache.reserve(pos0 + n));

  for (int64_t done = 0; done < n;) {
    const int64_t m = std::min(max_batch_, n - done);
    const bool last = done + m == n;
    float* out = nullptr;
    if (logits != nullptr && all_logits) out = logits + done * config_.vocab;
    if (logits != nullptr && !all_logits && last) out = logits;
    TG_TRY(forward_batch(cache, tokens + done, m, pos0 + done, out, all_logits, pool));
    done += m;
  }
  return Status::Ok();
}

Status Model::forward_batch(KvCache& cache, const int32_t* tokens, int64_t m, int64_t pos0,
                            float* logits, bool all_rows, ThreadPool& pool) {
  const ModelConfig& c = config_;
  TG_TRY(ensure_buffers(m));
  const int64_t E = c.n_embd;
  float* x = x_.data();
  float* xn = xn_.data();
  float* q = q_.data();
  float* k = k_.data();
  float* v = v_.data();

  for (int64_t t = 0; t < m; ++t) get_row(weights_.token_embd, tokens[t], x + t * E);
  rope_.tables(pos0, m, rope_cos_.data(), rope_sin_.data());

  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& L = weights_.layers[static_cast<size_t>(l)];

    // Attention sub-block.
    for (int64_t t = 0; t < m; ++t) rmsnorm(x + t * E, L.attn_norm.data(), xn + t * E, E, c.rms_eps);
    matmul(L.wq, xn, m, q, pool);
    matmul(L.wk, xn, m, k, pool);
    matmul(L.wv, xn, m, v, pool);
    if (c.qkv_bias) {
      for (int64_t t = 0; t < m; ++t) {
        add(q + t * c.q_dim(), L.bq.data(), c.q_dim());
        add(k + t * c.kv_dim(), L.bk.data(), c.kv_dim());
        add(v + t * c.v_dim(), L.bv.data(), c.v_dim());
      }
    }
    if (c.qk_norm) {
      for (int64_t h = 0; h < m * c.n_head; ++h)
        rmsnorm(q + h * c.head_dim, L.q_norm.data(), q + h * c.head_dim, c.head_dim, c.rms_eps);
      for (int64_t h = 0; h < m * c.n_kv_head; ++h)
        rmsnorm(k + h * c.head_dim, L.k_norm.data(), k + h * c.head_dim, c.head_dim, c.rms_eps);
    }
    rope_.apply(q, m, c.n_head, c.head_dim, rope_cos_.data(), rope_sin_.data());
    rope_.apply(k, m, c.n_kv_head, c.head_dim, rope_cos_.data(), rope_sin_.data());
    TG_TRY(cache.write(l, pos0, k, v, m));
    cache.attend(l, q, m, pos0, attn_.data(), pool);
    matmul(L.wo, attn_.data(), m, proj_.data(), pool);
    add(x, proj_.data(), m * E);

    // Feed-forward sub-block (SwiGLU).
    for (int64_t t = 0; t < m; ++t) rmsnorm(x + t * E, L.ffn_norm.data(), xn + t * E, E, c.rms_eps);
    matmul(L.w_gate, xn, m, gate_.data(), pool);
    matmul(L.w_up, xn, m, up_.data(), pool);
    swiglu(gate_.data(), up_.data(), m * c.n_ff);
    matmul(L.w_down, gate_.data(), m, proj_.data(), pool);
    add(x, proj_.data(), m * E);
  }

  if (logits == nullptr) return Status::Ok();
  // Only the rows whose logits are wanted go through the final norm and output projection.
  const int64_t first = all_rows ? 0 : m - 1;
  const int64_t rows = m - first;
  for (int64_t t = first; t < m; ++t)
    rmsnorm(x + t * E, weights_.output_norm.data(), xn + (t - first) * E, E, c.rms_eps);
  matmul(weights_.output, xn, rows, logits, pool);
  return Status::Ok();
}

}  // namespace tangram
