#include "evaluation/perplexity.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "compress/compressor.h"
#include "evaluation/accuracy.h"
#include "kv/block_pool.h"
#include "kv/paged_kv_cache.h"

namespace tangram {

namespace {

// One sequence under one policy: the compressor the scheduler would build, a pool with room for
// the uncompressed window, the window's cache, and where the last compression left off.
struct Track {
  std::unique_ptr<Compressor> comp;
  std::unique_ptr<BlockPool> pages;
  std::unique_ptr<PagedKvCache> cache;
  int64_t capacity = 0;
  int64_t compress_base = 0;  // the scheduler's Sequence::compress_base
  int64_t compressions = 0;
  int64_t skipped = 0;
};

Result<Track> make_track(Model& model, const CompressionOptions& policy, const PerplexityOptions& o,
                         int64_t window) {
  const ModelConfig& cfg = model.config();
  Track t;
  TG_ASSIGN(t.comp, Compressor::create(policy, cfg, model.rope(), o.group_size));
  // Room past the window for the KVzip pass, as much as the model's context allows.
  int64_t capacity = window;
  if (policy.compresses() && t.comp->scorer().query_source() == QuerySource::Reconstruction) {
    if (o.repeat_instruction.empty())
      return make_error("perplexity: the {} scorer needs the repeat instruction's tokens",
                        policy.scorer.name);
    capacity =
        std::min(cfg.context_length, window + static_cast<int64_t>(o.repeat_instruction.size()) +
                                         policy.reconstruction_tokens);
  }
  const PageGeometry geo{o.page_tokens, t.comp->group_size(), cfg.head_dim, cfg.head_dim_v,
                         o.kv_type};
  TG_TRY(geo.validate());
  const int64_t per_group = (capacity + o.page_tokens - 1) / o.page_tokens + 1;
  const int64_t n_pages = int64_t{t.comp->group_map()->total_groups()} * per_group;
  TG_ASSIGN(t.pages, BlockPool::create(geo, static_cast<size_t>(n_pages) * geo.page_bytes(),
                                       /*prefault=*/false));
  t.capacity = capacity;
  return t;
}

// A fresh, empty cache for the next window (the old one's pages go back first).
Status reset_track(Model& model, Track& t) {
  t.cache.reset();
  TG_ASSIGN(t.cache,
            PagedKvCache::create(model.kv_shape(), t.capacity, *t.pages, t.comp->group_map()));
  t.compress_base = 0;
  return Status::Ok();
}

// Observation-window rows to capture while running up to `point`, as the scheduler's
// prepare_capture chooses them: the last queries_wanted positions, but only this turn's.
ScorerQueries observation_rows(const Model& model, const Track& t, int64_t point) {
  ScorerQueries q;
  if (t.comp->scorer().query_source() != QuerySource::Observation) return q;
  const int64_t from = std::max(point - t.comp->queries_wanted(point), t.compress_base);
  q.n_rows = point - from;
  q.pos0 = from;
  const ModelConfig& c = model.config();
  q.rows.assign(static_cast<size_t>(c.n_layers) * static_cast<size_t>(q.n_rows) *
                    static_cast<size_t>(c.q_dim()),
                0.0f);
  return q;
}

// Compresses the track's cache, which holds `context` (the window's tokens up to the point),
// as the scheduler's compress_sequence does: the KVzip pass repeats as many of the last context
// tokens as the context has room for, and is skipped (counted) when there is none.
Status compress_track(Model& model, Track& t, std::span<const int32_t> context, ScorerQueries& q,
                      const PerplexityOptions& o, ThreadPool& pool) {
  const auto point = static_cast<int64_t>(context.size());
  if (t.comp->scorer().query_source() == QuerySource::Reconstruction) {
    const int64_t room = std::min(t.capacity, model.config().context_length) - point -
                         static_cast<int64_t>(o.repeat_instruction.size());
    const int64_t r = std::min({t.comp->options().reconstruction_tokens, point, room});
    t.compress_base = point;
    if (r < 1) {
      ++t.skipped;
      return Status::Ok();
    }
    TG_TRY(reconstruction_pass(model, *t.cache, context, o.repeat_instruction, r, q, pool));
  }
  const float* rows = q.rows.empty() ? nullptr : q.rows.data();
  TG_TRY(t.comp->compress(*t.cache, rows, q.n_rows, q.pos0, pool));
  t.compress_base = point;
  ++t.compressions;
  return Status::Ok();
}

// One turn: window positions [from, to) appended to the track, every row's logits to `logits`
// ([to - from][vocab]). Compressed at the scheduler's points: every CompressionOptions::chunk
// tokens since the last compression, and at the turn's end (unless the policy compresses
// only the first turn and this is a later one).
Status run_turn(Model& model, Track& t, std::span<const int32_t> win, int64_t from, int64_t to,
                bool later_turn, float* logits, const PerplexityOptions& o, ThreadPool& pool) {
  const CompressionOptions& co = t.comp->options();
  const bool compresses = co.compresses() && !(co.first_turn_only && later_turn);
  const int64_t vocab = model.config().vocab;
  t.compress_base = from;
  for (int64_t pos = from; pos < to;) {
    const int64_t point = compresses ? std::min(to, t.compress_base + co.chunk) : to;
    ScorerQueries q = compresses ? observation_rows(model, t, point) : ScorerQueries{};
    float* capture = q.rows.empty() ? nullptr : q.rows.data();
    TG_TRY(run_capturing(model, *t.cache,
                         win.subspan(static_cast<size_t>(pos), static_cast<size_t>(point - pos)),
                         pos, logits + (pos - from) * vocab, capture, q.pos0, q.n_rows, pool,
                         /*all_logits=*/true, o.max_step));
    if (compresses)
      TG_TRY(compress_track(model, t, win.first(static_cast<size_t>(point)), q, o, pool));
    pos = point;
  }
  return Status::Ok();
}

// Sums over scored positions (and over turns, for retention).
struct Tally {
  double nll = 0, nll2 = 0;  // sum of NLL and of its square
  int64_t n = 0;
  double kl = 0, kl_max = 0;
  int64_t top1_agree = 0;  // rows whose argmax equals the reference's
  double bytes_ratio = 0, entries_ratio = 0;
  int64_t turns = 0;
};

// Scores rows [from, to) of the window: row r predicts win[r + 1] (the window's last row
// predicts nothing); with a reference, KL(p_full || p_policy) of the same rows.
Status score_turn(std::span<const int32_t> win, int64_t from, int64_t to, const float* logits,
                  const float* full_logits, int64_t vocab, Tally& tally) {
  std::vector<double> lp(static_cast<size_t>(vocab));  // [vocab] log-probabilities
  for (int64_t r = from; r < to && r + 1 < static_cast<int64_t>(win.size()); ++r) {
    const std::span<const float> row(logits + (r - from) * vocab, static_cast<size_t>(vocab));
    if (!all_finite(row))
      return make_error("perplexity: non-finite logits at window position {}", r);
    log_softmax(row, lp);
    const double nll = -lp[static_cast<size_t>(win[static_cast<size_t>(r + 1)])];
    tally.nll += nll;
    tally.nll2 += nll * nll;
    ++tally.n;
    if (full_logits == nullptr) continue;
    const std::span<const float> ref(full_logits + (r - from) * vocab, static_cast<size_t>(vocab));
    if (!all_finite(ref))
      return make_error("perplexity: non-finite full-KV logits at window position {}", r);
    const double kl = kl_divergence(ref, row);
    tally.kl += kl;
    tally.kl_max = std::max(tally.kl_max, kl);
    if (std::max_element(row.begin(), row.end()) - row.begin() ==
        std::max_element(ref.begin(), ref.end()) - ref.begin())
      ++tally.top1_agree;
  }
  return Status::Ok();
}

// After a turn: the policy's KV bytes and entries over full KV's for the same positions.
void add_retention(const Track& policy, const Track& full, Tally& tally) {
  const PoolStats ps = policy.pages->stats(), fs = full.pages->stats();
  const double pb = static_cast<double>(ps.used_pages) * static_cast<double>(ps.page_bytes);
  const double fb = static_cast<double>(fs.used_pages) * static_cast<double>(fs.page_bytes);
  tally.bytes_ratio += fb > 0 ? pb / fb : 1.0;
  const auto fe = static_cast<double>(full.cache->used_slots());
  tally.entries_ratio += fe > 0 ? static_cast<double>(policy.cache->used_slots()) / fe : 1.0;
  ++tally.turns;
}

double running_ppl(const Tally& t) {
  return t.n > 0 ? std::exp(t.nll / static_cast<double>(t.n)) : 0.0;
}

// One window, turn by turn, on the policy track and (when given) the full-KV reference.
Status evaluate_window(Model& model, std::span<const int32_t> win, Track& policy, Track* full,
                       const PerplexityOptions& o, ThreadPool& pool, PerplexityProgress progress,
                       const std::function<void(const PerplexityProgress&)>& on_turn,
                       Tally& tally) {
  const int64_t vocab = model.config().vocab;
  const auto n = static_cast<int64_t>(win.size());
  const int64_t rows = std::min(o.chunk, n);
  std::vector<float> logits(static_cast<size_t>(rows * vocab));  // [rows][vocab]
  std::vector<float> full_logits(full != nullptr ? static_cast<size_t>(rows * vocab)
                                                 : 0);  // [rows][vocab]
  TG_TRY(reset_track(model, policy));
  if (full != nullptr) TG_TRY(reset_track(model, *full));
  for (int64_t from = 0, turn = 0; from < n; from += o.chunk, ++turn) {
    const int64_t to = std::min(n, from + o.chunk);
    TG_TRY(run_turn(model, policy, win, from, to, turn > 0, logits.data(), o, pool));
    if (full != nullptr) {
      TG_TRY(run_turn(model, *full, win, from, to, turn > 0, full_logits.data(), o, pool));
      add_retention(policy, *full, tally);
    }
    TG_TRY(score_turn(win, from, to, logits.data(), full != nullptr ? full_logits.data() : nullptr,
                      vocab, tally));
    progress.turn = turn;
    progress.positions = to;
    progress.scored = tally.n;
    progress.ppl = running_ppl(tally);
    progress.mean_kl = tally.n > 0 ? tally.kl / static_cast<double>(tally.n) : 0.0;
    if (on_turn) on_turn(progress);
  }
  return Status::Ok();
}

Status check_inputs(const Model& model, std::span<const int32_t> tokens,
                    const PerplexityOptions& o) {
  const ModelConfig& cfg = model.config();
  if (tokens.size() < 2)
    return make_error(
        "perplexity: the text has {} token(s); at least two are needed (one to predict from)",
        tokens.size());
  if (o.chunk < 1)
    return make_error("perplexity: the chunk must be at least 1 token, got {}", o.chunk);
  if (o.window < 0 || o.window == 1)
    return make_error("perplexity: the window (context) must be at least 2 tokens, got {}",
                      o.window);
  if (o.window > cfg.context_length)
    return make_error("perplexity: the window of {} tokens exceeds the model's context of {}",
                      o.window, cfg.context_length);
  if (o.page_tokens < 1)
    return make_error("perplexity: page_tokens must be >= 1, got {}", o.page_tokens);
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= cfg.vocab)
      return make_error("perplexity: token id {} at index {} is outside the vocabulary [0, {})",
                        tokens[i], i, cfg.vocab);
  if (o.bos >= cfg.vocab)
    return make_error("perplexity: BOS id {} is outside the vocabulary", o.bos);
  return o.policy.validate();
}

void finish(const Tally& t, const Track& policy, PerplexityResult& r) {
  const auto n = static_cast<double>(t.n);
  r.scored = t.n;
  r.mean_nll = t.nll / n;
  // llama-perplexity's estimate: sqrt((E[x^2] - E[x]^2) / (n - 1)).
  const double var = std::max(0.0, t.nll2 / n - r.mean_nll * r.mean_nll);
  r.nll_stderr = t.n > 1 ? std::sqrt(var / (n - 1)) : 0.0;
  r.ppl = std::exp(r.mean_nll);
  r.ppl_stderr = r.ppl * r.nll_stderr;
  if (r.compared) {
    r.mean_kl = t.kl / n;
    r.max_kl = t.kl_max;
    r.top1_agreement = n > 0 ? static_cast<double>(t.top1_agree) / n : 1.0;
    r.retention_bytes = t.turns > 0 ? t.bytes_ratio / static_cast<double>(t.turns) : 1.0;
    r.retention_entries = t.turns > 0 ? t.entries_ratio / static_cast<double>(t.turns) : 1.0;
  }
  r.compressions = policy.compressions;
  r.compressions_skipped = policy.skipped;
}

}  // namespace

Result<PerplexityResult> evaluate_perplexity(
    Model& model, std::span<const int32_t> tokens, const PerplexityOptions& o, ThreadPool& pool,
    const std::function<void(const PerplexityProgress&)>& on_turn) {
  TG_TRY(check_inputs(model, tokens, o));
  const ModelConfig& cfg = model.config();
  PerplexityResult r;
  r.n_tokens = static_cast<int64_t>(tokens.size());
  r.window = std::min(o.window > 0 ? o.window : cfg.context_length, r.n_tokens);
  r.n_windows = r.n_tokens / r.window;
  r.skipped_tokens = r.n_tokens - r.n_windows * r.window;
  TG_ASSIGN(Track policy, make_track(model, o.policy, o, r.window));
  const KvType reference_type = o.reference_kv_type.value_or(o.kv_type);
  r.compared = o.policy.compresses() || o.kv_type != reference_type;
  Track full;
  if (r.compared) {
    PerplexityOptions fo = o;
    fo.group_size = -1;  // full KV's own layout: unified pages
    fo.kv_type = reference_type;
    TG_ASSIGN(full, make_track(model, CompressionOptions{}, fo, r.window));
  }
  Tally tally;
  std::vector<int32_t> win(static_cast<size_t>(r.window));  // [window] this window's tokens
  for (int64_t w = 0; w < r.n_windows; ++w) {
    std::copy_n(tokens.begin() + w * r.window, r.window, win.begin());
    if (w > 0 && o.bos >= 0) win[0] = o.bos;  // llama-perplexity: every window starts with BOS
    PerplexityProgress p;
    p.window = w;
    p.n_windows = r.n_windows;
    TG_TRY(evaluate_window(model, win, policy, r.compared ? &full : nullptr, o, pool, p, on_turn,
                           tally));
  }
  finish(tally, policy, r);
  return r;
}

}  // namespace tangram
