#include "evaluation/accuracy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string_view>
#include <vector>

#include "compress/compressor.h"
#include "kv/block_pool.h"
#include "kv/paged_kv_cache.h"
#include "tokenizer/tokenizer.h"

namespace tangram {

namespace {

// Continuation rows run per teacher-forced step: bounds the two logits buffers to
// [kTeacherRows][vocab] each, whatever the continuation length.
constexpr int64_t kTeacherRows = 32;

// Feeds the same continuation to both caches (at the end of the context) and accumulates
// KL(p_full || p_policy) after every token.
Status teacher_forced_kl(Model& model, KvCache& full, KvCache& policy,
                         std::span<const int32_t> continuation, int64_t pos0, ThreadPool& pool,
                         AgreementResult& out) {
  const int64_t vocab = model.config().vocab;
  const auto n = static_cast<int64_t>(continuation.size());
  const int64_t rows = std::min(kTeacherRows, n);
  std::vector<float> full_logits(static_cast<size_t>(rows * vocab));    // [rows][vocab]
  std::vector<float> policy_logits(static_cast<size_t>(rows * vocab));  // [rows][vocab]
  double sum = 0.0, worst = 0.0;
  for (int64_t done = 0; done < n;) {
    const int64_t m = std::min(rows, n - done);
    const int32_t* toks = continuation.data() + done;
    TG_TRY(model.forward(full, toks, m, pos0 + done, full_logits.data(), pool, true));
    TG_TRY(model.forward(policy, toks, m, pos0 + done, policy_logits.data(), pool, true));
    for (int64_t r = 0; r < m; ++r) {
      const std::span<const float> p(full_logits.data() + r * vocab, static_cast<size_t>(vocab));
      const std::span<const float> q(policy_logits.data() + r * vocab, static_cast<size_t>(vocab));
      if (!all_finite(p) || !all_finite(q))
        return make_error("accuracy: non-finite logits at continuation position {}", done + r);
      const double kl = kl_divergence(p, q);
      sum += kl;
      worst = std::max(worst, kl);
    }
    done += m;
  }
  out.mean_kl = sum / static_cast<double>(n);
  out.max_kl = worst;
  return Status::Ok();
}

// Greedy generation from both caches (each from its own prefill logits), stopped at the first
// token where they differ.
Status greedy_agreement(Model& model, KvCache& full, KvCache& policy,
                        std::span<const float> full_prefill_logits,
                        std::span<const float> policy_prefill_logits, int64_t pos0, int n_generate,
                        ThreadPool& pool, AgreementResult& out) {
  std::vector<float> full_logits(full_prefill_logits.begin(),
                                 full_prefill_logits.end());  // [vocab]
  std::vector<float> policy_logits(policy_prefill_logits.begin(),
                                   policy_prefill_logits.end());  // [vocab]
  int64_t matched = 0;
  out.first_divergence = -1;
  for (int64_t i = 0; i < n_generate; ++i) {
    if (i > 0) {
      // Both sides produced the same token so far; feed it to each.
      const int32_t prev = argmax(full_logits);
      TG_TRY(model.forward(full, &prev, 1, pos0 + i - 1, full_logits.data(), pool));
      TG_TRY(model.forward(policy, &prev, 1, pos0 + i - 1, policy_logits.data(), pool));
    }
    if (!all_finite(full_logits) || !all_finite(policy_logits))
      return make_error("accuracy: non-finite logits at generated token {}", i);
    if (argmax(full_logits) != argmax(policy_logits)) {
      out.first_divergence = i;
      break;
    }
    ++matched;
  }
  out.token_match_rate =
      n_generate > 0 ? static_cast<double>(matched) / static_cast<double>(n_generate) : 1.0;
  return Status::Ok();
}

}  // namespace

Status run_capturing(Model& model, KvCache& cache, std::span<const int32_t> tokens, int64_t pos0,
                     float* logits, float* capture_q, int64_t capture_from, int64_t capture_rows,
                     ThreadPool& pool, bool all_logits, int64_t max_step) {
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t step_max = max_step > 0 ? std::min(max_step, model.max_batch()) : model.max_batch();
  const int64_t vocab = model.config().vocab;
  for (int64_t done = 0; done < n;) {
    const int64_t m = std::min(step_max, n - done);
    SequenceStep step;
    step.cache = &cache;
    step.tokens = tokens.data() + done;
    step.n = m;
    step.pos0 = pos0 + done;
    if (all_logits && logits != nullptr) {
      step.logits = logits + done * vocab;  // this step's rows of [n][vocab]
      step.all_logits = true;
    } else {
      step.logits = done + m == n ? logits : nullptr;
    }
    step.capture_q = capture_q;
    step.capture_from = capture_from;
    step.capture_rows = capture_q != nullptr ? capture_rows : 0;
    TG_TRY(model.forward_step(std::span<const SequenceStep>(&step, 1), pool));
    done += m;
  }
  return Status::Ok();
}

Status reconstruction_pass(Model& model, PagedKvCache& cache, std::span<const int32_t> context,
                           std::span<const int32_t> instruction, int64_t n_rows, ScorerQueries& q,
                           ThreadPool& pool) {
  const auto n_ctx = static_cast<int64_t>(context.size());
  std::vector<int32_t> pass(instruction.begin(), instruction.end());  // [instruction + n_rows]
  pass.insert(pass.end(), context.end() - n_rows, context.end());
  q.n_rows = n_rows;
  q.pos0 = n_ctx + static_cast<int64_t>(instruction.size());
  const ModelConfig& c = model.config();
  q.rows.assign(static_cast<size_t>(c.n_layers) * static_cast<size_t>(n_rows) *
                    static_cast<size_t>(c.q_dim()),
                0.0f);
  const Status st =
      run_capturing(model, cache, pass, n_ctx, nullptr, q.rows.data(), q.pos0, n_rows, pool);
  cache.truncate(n_ctx);  // the pass leaves nothing behind
  return st;
}

Result<AgreementResult> policy_agreement(Model& model, const CompressionOptions& policy,
                                         int group_size, int page_tokens,
                                         std::span<const int32_t> context,
                                         std::span<const int32_t> continuation, int n_generate,
                                         ThreadPool& pool) {
  const ModelConfig& cfg = model.config();
  const auto n_ctx = static_cast<int64_t>(context.size());
  const auto n_cont = static_cast<int64_t>(continuation.size());
  if (n_ctx < 1) return make_error("accuracy: the context is empty");
  if (n_cont < 1) return make_error("accuracy: the continuation is empty");
  if (n_generate < 0) return make_error("accuracy: n_generate must be >= 0, got {}", n_generate);
  if (page_tokens < 1) return make_error("accuracy: page_tokens must be >= 1, got {}", page_tokens);
  TG_TRY(policy.validate());
  TG_ASSIGN(auto comp, Compressor::create(policy, cfg, model.rope(), group_size));

  // Queries for the scorer, and how far past the context each phase writes.
  const QuerySource source = comp->scorer().query_source();
  const int64_t n_q = comp->queries_wanted(n_ctx);  // <= n_ctx; 0 when nothing is compressed
  std::vector<int32_t> instruction;
  if (source == QuerySource::Reconstruction && n_q > 0) {
    TG_ASSIGN(auto tok, Tokenizer::from_gguf(model.gguf()));
    instruction = tok->encode(kRepeatInstruction, false, false);
  }
  const int64_t recon_extra = n_q > 0 && source == QuerySource::Reconstruction
                                  ? static_cast<int64_t>(instruction.size()) + n_q
                                  : 0;
  const int64_t extra = std::max({n_cont, int64_t{n_generate} - 1, recon_extra});
  const int64_t capacity = n_ctx + extra;
  if (capacity > cfg.context_length)
    return make_error(
        "accuracy: context {} plus {} more positions exceeds the model's context of {}", n_ctx,
        extra, cfg.context_length);

  // The reference: a contiguous F32 cache, nothing evicted.
  std::unique_ptr<KvCache> full = model.new_cache(capacity, KvType::F32);
  std::vector<float> full_prefill(static_cast<size_t>(cfg.vocab));  // [vocab]
  TG_TRY(model.forward(*full, context.data(), n_ctx, 0, full_prefill.data(), pool));

  // The policy: a paged F32 cache in a pool large enough for the uncompressed sequence.
  const int groups = comp->group_map()->total_groups();
  const PageGeometry geo{page_tokens, comp->group_size(), cfg.head_dim, cfg.head_dim_v,
                         KvType::F32};
  TG_TRY(geo.validate());
  const int64_t pages = int64_t{groups} * ((capacity + page_tokens - 1) / page_tokens + 1);
  TG_ASSIGN(auto block_pool, BlockPool::create(geo, static_cast<size_t>(pages) * geo.page_bytes(),
                                               /*prefault=*/false));
  TG_ASSIGN(auto paged,
            PagedKvCache::create(model.kv_shape(), capacity, *block_pool, comp->group_map()));
  std::vector<float> policy_prefill(static_cast<size_t>(cfg.vocab));  // [vocab]
  ScorerQueries q;
  if (source == QuerySource::Observation && n_q > 0) {
    q.n_rows = n_q;
    q.pos0 = n_ctx - n_q;
    q.rows.assign(static_cast<size_t>(cfg.n_layers) * static_cast<size_t>(n_q) *
                      static_cast<size_t>(cfg.q_dim()),
                  0.0f);
  }
  TG_TRY(run_capturing(model, *paged, context, 0, policy_prefill.data(),
                       q.rows.empty() ? nullptr : q.rows.data(), q.pos0, q.n_rows, pool));
  if (source == QuerySource::Reconstruction && n_q > 0)
    TG_TRY(reconstruction_pass(model, *paged, context, instruction, n_q, q, pool));

  AgreementResult out;
  TG_ASSIGN(
      const CompressionReport rep,
      comp->compress(*paged, q.rows.empty() ? nullptr : q.rows.data(), q.n_rows, q.pos0, pool));
  out.kept_entries = rep.entries_after;
  out.total_entries = rep.entries_before;
  if (!all_finite(full_prefill) || !all_finite(policy_prefill))
    return make_error("accuracy: non-finite logits after the prefill");

  TG_TRY(greedy_agreement(model, *full, *paged, full_prefill, policy_prefill, n_ctx, n_generate,
                          pool, out));
  // Back to the end of the context; the compressed entries all lie inside it, so this restores
  // the state right after compression.
  full->truncate(n_ctx);
  paged->truncate(n_ctx);
  TG_TRY(teacher_forced_kl(model, *full, *paged, continuation, n_ctx, pool, out));
  return out;
}

void log_softmax(std::span<const float> logits, std::span<double> out) {
  double mx = -std::numeric_limits<double>::infinity();
  for (const float x : logits) mx = std::max(mx, static_cast<double>(x));
  double sum = 0.0;
  for (const float x : logits) sum += std::exp(static_cast<double>(x) - mx);
  const double lse = mx + std::log(sum);
  const size_t n = std::min(logits.size(), out.size());
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<double>(logits[i]) - lse;
}

double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits) {
  if (p_logits.empty() || p_logits.size() != q_logits.size())
    return std::numeric_limits<double>::quiet_NaN();
  std::vector<double> lp(p_logits.size()), lq(q_logits.size());  // [vocab] log-probabilities
  log_softmax(p_logits, lp);
  log_softmax(q_logits, lq);
  double kl = 0.0;
  for (size_t i = 0; i < lp.size(); ++i) {
    const double p = std::exp(lp[i]);
    if (p == 0.0) continue;  // 0 * log(0 / q) = 0, also when q = 0
    if (std::isinf(lq[i])) return std::numeric_limits<double>::infinity();
    kl += p * (lp[i] - lq[i]);
  }
  return std::max(kl, 0.0);
}

int32_t argmax(std::span<const float> logits) {
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;
  return static_cast<int32_t>(best);
}

bool all_finite(std::span<const float> values) {
  return std::all_of(values.begin(), values.end(), [](float x) { return std::isfinite(x); });
}

}  // namespace tangram
