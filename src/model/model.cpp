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
  TG_ASSIGN(auto gguf, GgufFile::open(path, options.weights, options.load_progress));
  TG_ASSIGN(ModelConfig config, read_model_config(*gguf));
  TG_ASSIGN(ModelWeights weights, bind_weights(*gguf, config));
  if (gguf->memory() == FileMemory::kHugePages) {
    // The copy is ours to rewrite: matmul weights interleaved once here instead of per panel
    // in every product; bound again so the views carry their new layout.
    TG_TRY(gguf->rewrite_tensors(matmul_weight_names(config), interleave_for_matmul));
    TG_ASSIGN(weights, bind_weights(*gguf, config));
  }
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
  const int64_t cap =
      max_tokens <= 0 ? config_.context_length : std::min(max_tokens, config_.context_length);
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

Status Model::check_step(const SequenceStep& s) const {
  if (s.cache == nullptr) return make_error("forward: no KV cache given");
  if (s.n < 1 || s.tokens == nullptr) return make_error("forward: no tokens given");
  const KvCache& cache = *s.cache;
  const KvShape want = kv_shape();
  const KvShape& got = cache.shape();
  if (got.n_layers != want.n_layers || got.n_head != want.n_head ||
      got.n_kv_head != want.n_kv_head || got.head_dim != want.head_dim ||
      got.head_dim_v != want.head_dim_v)
    return make_error("forward: the KV cache was made for a model of another shape");
  if (s.pos0 != cache.n_positions())
    return make_error("forward: position {} does not continue the cache, which holds {}", s.pos0,
                      cache.n_positions());
  // Sizes are checked before any token is read; written as subtractions so huge n cannot
  // overflow.
  if (s.n > config_.context_length - s.pos0)
    return make_error("context overflow: {} + {} tokens exceed the model's context of {}", s.pos0,
                      s.n, config_.context_length);
  if (s.n > cache.capacity() - s.pos0)
    return make_error("context overflow: {} + {} tokens exceed the KV cache capacity of {}", s.pos0,
                      s.n, cache.capacity());
  for (int64_t i = 0; i < s.n; ++i)
    if (s.tokens[i] < 0 || s.tokens[i] >= config_.vocab)
      return make_error("forward: token id {} at index {} is outside the vocabulary [0, {})",
                        s.tokens[i], i, config_.vocab);
  return Status::Ok();
}

Status Model::forward(KvCache& cache, const int32_t* tokens, int64_t n, int64_t pos0, float* logits,
                      ThreadPool& pool, bool all_logits) {
  TG_TRY(check_step(SequenceStep{&cache, tokens, n, pos0, logits, all_logits}));
  TG_TRY(cache.reserve(pos0 + n));
  for (int64_t done = 0; done < n;) {
    const int64_t m = std::min(max_batch_, n - done);
    const bool last = done + m == n;
    SequenceStep step{&cache, tokens + done, m, pos0 + done, nullptr, all_logits};
    if (logits != nullptr && all_logits) step.logits = logits + done * config_.vocab;
    if (logits != nullptr && !all_logits && last) step.logits = logits;
    TG_TRY(run_step(std::span<const SequenceStep>(&step, 1), m, pool));
    done += m;
  }
  return Status::Ok();
}

Status Model::forward_step(std::span<const SequenceStep> seqs, ThreadPool& pool) {
  if (seqs.empty()) return make_error("forward: no sequences given");
  int64_t m = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    TG_TRY(check_step(seqs[i]));
    for (size_t j = 0; j < i; ++j)
      if (seqs[j].cache == seqs[i].cache)
        return make_error("forward: one KV cache appears twice in a step");
    m += seqs[i].n;
  }
  if (m > max_batch_)
    return make_error("forward: a step of {} tokens exceeds the batch limit of {}", m, max_batch_);
  for (const SequenceStep& s : seqs) TG_TRY(s.cache->reserve(s.pos0 + s.n));
  return run_step(seqs, m, pool);
}

void Model::capture_queries(std::span<const SequenceStep> seqs, int layer, const float* q) const {
  const int64_t qd = config_.q_dim();
  int64_t r = 0;
  for (const SequenceStep& s : seqs) {
    if (s.capture_q != nullptr && s.capture_rows > 0) {
      const int64_t first = std::max(s.pos0, s.capture_from);
      const int64_t last = std::min(s.pos0 + s.n, s.capture_from + s.capture_rows);
      for (int64_t pos = first; pos < last; ++pos)
        std::copy_n(q + (r + pos - s.pos0) * qd, qd,
                    s.capture_q + (layer * s.capture_rows + (pos - s.capture_from)) * qd);
    }
    r += s.n;
  }
}

// One step, llama2.c style. m rows (the step's tokens, sequence after sequence), E = n_embd.
Status Model::run_step(std::span<const SequenceStep> seqs, int64_t m, ThreadPool& pool) {
  TG_TRY(ensure_buffers(m));
  const int64_t logit_rows = embed_tokens(seqs);  // x: [m][E]
  try {
    attn_queries_.clear();
    for (const SequenceStep& s : seqs)
      attn_queries_.push_back(AttentionQuery{s.cache, s.n, s.pos0});
  } catch (const std::bad_alloc&) {
    return make_error("forward: out of host memory for the attention of {} sequences", seqs.size());
  }
  TG_TRY(attention_.begin_step(attn_queries_, config_.n_layers));
  for (int l = 0; l < config_.n_layers; ++l) {
    TG_TRY(attention_block(l, seqs, m, pool));
    feed_forward_block(l, m, pool);
  }
  output_hidden(seqs);
  return output_logits(seqs, logit_rows, pool);  // logits: [logit_rows][vocab]
}

int64_t Model::embed_tokens(std::span<const SequenceStep> seqs) {
  const int64_t E = config_.n_embd;
  const int64_t half = rope_.half();
  int64_t logit_rows = 0;
  int64_t r = 0;  // sequence i owns rows [r, r + n)
  for (const SequenceStep& s : seqs) {
    for (int64_t t = 0; t < s.n; ++t)
      get_row(weights_.token_embd, s.tokens[t], x_.data() + (r + t) * E);
    rope_.tables(s.pos0, s.n, rope_cos_.data() + r * half, rope_sin_.data() + r * half);
    if (s.logits != nullptr) logit_rows += s.all_logits ? s.n : 1;
    r += s.n;
  }
  return logit_rows;
}

Status Model::attention_block(int layer, std::span<const SequenceStep> seqs, int64_t m,
                              ThreadPool& pool) {
  const ModelConfig& c = config_;
  const LayerWeights& L = weights_.layers[static_cast<size_t>(layer)];
  const int64_t E = c.n_embd;
  float* x = x_.data();
  float* xn = xn_.data();
  float* q = q_.data();
  float* k = k_.data();
  float* v = v_.data();

  for (int64_t t = 0; t < m; ++t) rmsnorm(x + t * E, L.attn_norm.data(), xn + t * E, E, c.rms_eps);
  // q: [m][n_head][head_dim], k: [m][n_kv_head][head_dim], v: [m][n_kv_head][head_dim_v],
  // in one parallel region.
  const MatmulOutput qkv[] = {{&L.wq, q}, {&L.wk, k}, {&L.wv, v}};
  matmul_group(qkv, xn, m, pool);
  if (c.qkv_bias) {
    for (int64_t t = 0; t < m; ++t) {
      add(q + t * c.q_dim(), L.bq.data(), c.q_dim());
      add(k + t * c.kv_dim(), L.bk.data(), c.kv_dim());
      add(v + t * c.v_dim(), L.bv.data(), c.v_dim());
    }
  }
  if (c.qk_norm) {  // per head
    for (int64_t h = 0; h < m * c.n_head; ++h)
      rmsnorm(q + h * c.head_dim, L.q_norm.data(), q + h * c.head_dim, c.head_dim, c.rms_eps);
    for (int64_t h = 0; h < m * c.n_kv_head; ++h)
      rmsnorm(k + h * c.head_dim, L.k_norm.data(), k + h * c.head_dim, c.head_dim, c.rms_eps);
  }
  rope_.apply(q, m, c.n_head, c.head_dim, rope_cos_.data(), rope_sin_.data());
  rope_.apply(k, m, c.n_kv_head, c.head_dim, rope_cos_.data(), rope_sin_.data());
  capture_queries(seqs, layer, q);
  int64_t r = 0;
  for (const SequenceStep& s : seqs) {
    TG_TRY(s.cache->write(layer, s.pos0, k + r * c.kv_dim(), v + r * c.v_dim(), s.n));
    r += s.n;
  }
  TG_TRY(attention_.attend(layer, q, attn_.data(), pool));  // attn: [m][n_head][head_dim_v]
  matmul(L.wo, attn_.data(), m, proj_.data(), pool);        // proj: [m][E]
  add(x, proj_.data(), m * E);
  return Status::Ok();
}

void Model::feed_forward_block(int layer, int64_t m, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const LayerWeights& L = weights_.layers[static_cast<size_t>(layer)];
  const int64_t E = c.n_embd;
  float* x = x_.data();
  float* xn = xn_.data();
  for (int64_t t = 0; t < m; ++t) rmsnorm(x + t * E, L.ffn_norm.data(), xn + t * E, E, c.rms_eps);
  matmul_swiglu(L.w_gate, L.w_up, xn, m, gate_.data(), up_.data(),
                pool);                                    // gate: [m][n_ff], swiglu'd
  matmul(L.w_down, gate_.data(), m, proj_.data(), pool);  // proj: [m][E]
  add(x, proj_.data(), m * E);
}

void Model::output_hidden(std::span<const SequenceStep> seqs) const {
  const int64_t E = config_.n_embd;
  int64_t r = 0;
  for (const SequenceStep& s : seqs) {
    if (s.hidden != nullptr)
      for (int64_t t = 0; t < s.n; ++t)
        rmsnorm(x_.data() + (r + t) * E, weights_.output_norm.data(), s.hidden + t * E, E,
                config_.rms_eps);
    r += s.n;
  }
}

Status Model::output_logits(std::span<const SequenceStep> seqs, int64_t logit_rows,
                            ThreadPool& pool) {
  if (logit_rows == 0) return Status::Ok();
  const ModelConfig& c = config_;
  const int64_t E = c.n_embd;
  // Only the rows whose logits are wanted go through the final norm and output projection.
  int64_t out_row = 0;
  int64_t r = 0;
  for (const SequenceStep& s : seqs) {
    if (s.logits != nullptr) {
      for (int64_t t = s.all_logits ? 0 : s.n - 1; t < s.n; ++t, ++out_row)
        rmsnorm(x_.data() + (r + t) * E, weights_.output_norm.data(), xn_.data() + out_row * E, E,
                c.rms_eps);
    }
    r += s.n;
  }
  const auto V = static_cast<int64_t>(c.vocab);
  if (seqs.size() == 1) {  // one destination: project straight into it
    matmul(weights_.output, xn_.data(), logit_rows, seqs[0].logits, pool);
    return Status::Ok();
  }
  try {
    if (logits_.size() < static_cast<size_t>(logit_rows * V))
      logits_.resize(static_cast<size_t>(logit_rows * V));
  } catch (const std::bad_alloc&) {
    return make_error("forward: out of host memory for {} rows of logits", logit_rows);
  }
  matmul(weights_.output, xn_.data(), logit_rows, logits_.data(), pool);  // [logit_rows][V]
  out_row = 0;
  for (const SequenceStep& s : seqs) {
    if (s.logits == nullptr) continue;
    const int64_t rows = s.all_logits ? s.n : 1;
    std::copy_n(logits_.data() + out_row * V, rows * V, s.logits);
    out_row += rows;
  }
  return Status::Ok();
}

}  // namespace tangram
