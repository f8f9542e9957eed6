#include "scheduler/scheduler.h"

#include <algorithm>
#include <limits>
#include <new>

#include "common/file_text.h"
#include "common/units.h"
#include "scheduler/context_shift.h"

namespace tangram {

namespace {

constexpr int32_t kNoAllowedToken = -2;  // sample_token: the constraint allows no token
// Fewer kept tokens than this are recomputed rather than moved (not worth a pass over the cache).
constexpr int64_t kMinShiftKept = 16;

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// What a tier's blob must match to be restored: the model, the KV type, the policy's settings
// and profile (which decide the entries a compressed cache holds) and the page layout.
SessionFingerprint session_fingerprint(const Model& model, const SchedulerOptions& options,
                                       const HeadGroupMap& map) {
  const CompressionOptions& co = options.compression;
  std::string policy = fmt::format("{} {} {} {} {} {} {}", kv_policy_name(co.policy), co.ratio,
                                   co.alpha, co.sink, co.window, co.chunk, co.scorer.name);
  for (const std::string& f : {co.profile, co.cluster_map}) {
    if (f.empty()) continue;
    // An unreadable file adds nothing here: loading the policy reports it.
    auto bytes = read_file_text(f, "the policy file");
    if (bytes) policy += *bytes;
  }
  return SessionFingerprint{model_fingerprint(model.gguf()), options.kv_type,
                            bytes_fingerprint(policy), group_map_fingerprint(map)};
}

}  // namespace

Scheduler::Scheduler(Model& model, const Tokenizer& tokenizer, ThreadPool& pool,
                     const SchedulerOptions& options)
    : model_(model), tokenizer_(tokenizer), pool_threads_(pool), options_(options) {}

Scheduler::~Scheduler() = default;

Result<std::unique_ptr<Scheduler>> Scheduler::create(Model& model, const Tokenizer& tokenizer,
                                                     ThreadPool& pool,
                                                     const SchedulerOptions& options,
                                                     const SessionKeeperOptions& sessions) {
  const ModelConfig& c = model.config();
  if (options.prefill_chunk < 1) return make_error("--prefill-chunk must be at least 1");
  if (options.step_tokens < 1) return make_error("the step token budget must be at least 1");
  if (options.step_tokens > model.max_batch())
    return make_error("the step token budget {} exceeds the model's batch limit of {}",
                      options.step_tokens, model.max_batch());
  if (options.max_running < 1) return make_error("at least one running sequence is needed");
  if (options.page_group_size < -1)
    return make_error("--page-group-size must be 0 (all KV heads), positive, or -1 (the policy's)");
  if (options.page_tokens < 1) return make_error("--page-tokens must be at least 1");
  // The compressor decides the page layout: its policy's head groups (tangram: heads of similar
  // budget clustered per layer; the other policies unified pages unless G is given).
  TG_ASSIGN(std::unique_ptr<Compressor> compressor,
            Compressor::create(options.compression, c, model.rope(), options.page_group_size));
  const int G = compressor->group_size();
  PageGeometry geometry{options.page_tokens, G, c.head_dim, c.head_dim_v, options.kv_type};
  TG_TRY(geometry.validate());
  TG_TRY(sessions.validate());

  std::unique_ptr<Scheduler> s(new Scheduler(model, tokenizer, pool, options));
  s->options_.page_group_size = G;
  s->options_.max_running =
      static_cast<int>(std::min<int64_t>(options.max_running, options.step_tokens));
  s->context_ =
      options.max_context > 0 ? std::min(options.max_context, c.context_length) : c.context_length;
  s->map_ = compressor->group_map();
  s->compressor_ = std::move(compressor);
  s->admission_ = AdmissionRule::for_policy(*s->compressor_, options.page_tokens);
  // The tangram policy splits decode attention ahead of time; the others plan every step.
  model.attention_planner().set_split(options.attention_split.value_or(
      options.compression.policy == KvPolicy::Tangram ? AttentionSplit::AheadOfTime
                                                      : AttentionSplit::Runtime));
  if (s->compressor_->scorer().query_source() == QuerySource::Reconstruction)
    s->repeat_prompt_ =
        tokenizer.encode("\n\nRepeat the previous context exactly.\n", false, false);
  if (options.kv_memory < geometry.page_bytes() * static_cast<size_t>(s->map_->total_groups()))
    return make_error(
        "--kv-memory {} cannot hold even one page per head group ({} groups x {}): "
        "give at least {}",
        format_bytes(static_cast<double>(options.kv_memory)), s->map_->total_groups(),
        format_bytes(static_cast<double>(geometry.page_bytes())),
        format_bytes(static_cast<double>(geometry.page_bytes()) * s->map_->total_groups()));
  TG_ASSIGN(s->pool_, BlockPool::create(geometry, options.kv_memory, options.prefault));
  const SessionFingerprint fingerprint =
      sessions.tiered() ? session_fingerprint(model, options, *s->map_) : SessionFingerprint{};
  TG_ASSIGN(
      s->sessions_,
      SessionKeeper::create(
          sessions, SessionPool{*s->pool_, s->map_, model.kv_shape(), s->context_}, fingerprint));
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id)
    if (tokenizer.is_eog(id)) s->eos_ids_.push_back(id);
  return s;
}

int64_t Scheduler::pages_for(int64_t n_total) const {
  return ceil_div(n_total, options_.page_tokens) * map_->total_groups();
}

Status Scheduler::validate(const Request& r) const {
  if (r.prompt.empty()) return make_error("the prompt is empty: give at least one token");
  if (r.top_logprobs > kMaxTopLogprobs)
    return make_error("top_logprobs is {}; at most {} alternatives per token are reported",
                      r.top_logprobs, kMaxTopLogprobs);
  const auto vocab = static_cast<int>(model_.config().vocab);
  for (size_t i = 0; i < r.prompt.size(); ++i)
    if (r.prompt[i] < 0 || r.prompt[i] >= vocab)
      return make_error("token id {} at prompt index {} is outside the vocabulary [0, {})",
                        r.prompt[i], i, vocab);
  const auto n = static_cast<int64_t>(r.prompt.size());
  if (n >= context_)
    return make_error(
        "the prompt has {} tokens but the context holds {}: shorten it by at least {}", n, context_,
        n - context_ + 1);
  if (r.n < 1 || r.n > kMaxChoices)
    return make_error("n is {}; between 1 and {} choices can be asked for", r.n, kMaxChoices);
  if (r.embed != Pooling::None) {
    if (r.embed != Pooling::Mean && r.embed != Pooling::Cls && r.embed != Pooling::Last)
      return make_error("embedding pooling '{}' is not one of mean, cls, last",
                        pooling_name(r.embed));
    if (r.n != 1 || !r.session_id.empty() || r.constraint)
      return make_error("an embedding request has one choice, no session and no constraint");
  }
  // With n choices, each fork may copy the partly filled last page of every group.
  const int64_t need = pages_for(n + 1) + int64_t{r.n - 1} * map_->total_groups();
  if (need > pool_->total_pages())
    return make_error(
        "the prompt's KV needs {} ({} pages) but the KV memory holds {} ({} pages): "
        "raise --kv-memory or shorten the prompt",
        format_bytes(static_cast<double>(need) * static_cast<double>(pool_->page_bytes())), need,
        format_bytes(static_cast<double>(pool_->total_pages()) *
                     static_cast<double>(pool_->page_bytes())),
        pool_->total_pages());
  return r.params.validate();
}

Result<RequestId> Scheduler::submit(Request request) {
  const RequestId id = next_id_;
  TG_TRY(submit_with_id(id, std::move(request)));  // advances next_id_
  return id;
}

Result<std::unique_ptr<Scheduler::Sequence>> Scheduler::new_sequence(
    RequestId id, const Request& request, int choice, std::optional<uint64_t> base_seed) const {
  auto s = std::make_unique<Sequence>();
  SamplingParams params = request.params;
  if (base_seed) {
    params.seed = *base_seed + static_cast<uint64_t>(choice);
    params.seed_set = true;
  }
  TG_ASSIGN(Sampler sampler, Sampler::create(params));
  sampler.set_eos_tokens(eos_ids_);
  s->sampler.emplace(std::move(sampler));
  if (request.constraint) s->constraint = request.constraint->clone();
  s->id = id;
  s->choice = choice;
  s->tokens = request.prompt;
  s->n_prompt = request.prompt.size();
  s->decoder = std::make_unique<StreamDecoder>(tokenizer_);
  s->stops = std::make_unique<StopStringMatcher>(request.params.stop);
  s->result.id = id;
  s->result.choice = choice;
  s->result.usage.prompt_tokens = static_cast<int64_t>(s->n_prompt);
  s->result.seed = s->sampler->seed();
  if (request.embed != Pooling::None) s->pooled.emplace(request.embed, model_.config().n_embd);
  return s;
}

Status Scheduler::submit_with_id(RequestId id, Request request) {
  TG_TRY(validate(request));
  TG_ASSIGN(std::unique_ptr<Sequence> s, new_sequence(id, request, 0, std::nullopt));
  s->arrival = next_arrival_++;
  s->submitted = Clock::now();
  s->request = std::move(request);
  next_id_ = std::max(next_id_, id + 1);
  // Its KV is read from disk or Redis while the request waits, not at admission.
  if (!s->request.session_id.empty()) sessions_->prefetch(s->request.session_id);
  insert_waiting(std::move(s));
  return Status::Ok();
}

void Scheduler::fork_choices(Sequence& s, const float* logits) {
  s.forked = true;
  const auto vocab = static_cast<size_t>(model_.config().vocab);
  // Choice i draws from seed + i: with a seed, each choice is reproducible on its own.
  const uint64_t base_seed = s.sampler->seed();
  std::vector<float> row;
  for (int c = 1; c < s.request.n; ++c) {
    Request request = s.request;
    request.session_id.clear();
    Result<std::unique_ptr<Sequence>> made = new_sequence(s.id, request, c, base_seed);
    if (!made) {  // the parameters were validated for choice 0, but the choice is still answered
      RequestResult failed = s.result;
      failed.finish = FinishReason::Error;
      failed.error = made.message();
      report_unforked_choice(s.request, failed, c);
      continue;
    }
    std::unique_ptr<Sequence> f = std::move(made).value();
    f->arrival = s.arrival;
    f->request = std::move(request);
    f->result.usage = s.result.usage;
    f->submitted = s.submitted;
    f->admitted = s.admitted;
    f->admitted_once = true;
    f->compress_base = s.compress_base;
    Result<std::unique_ptr<PagedKvCache>> cache = s.cache->fork();
    if (!cache) {
      finish(std::move(f), FinishReason::Error, cache.message());
      continue;
    }
    f->cache = std::move(cache).value();
    row.assign(logits, logits + vocab);  // sampling changes the row
    f->result.finish = FinishReason::Stop;
    if (sample_next(*f, row.data())) {
      const FinishReason reason = f->result.finish;
      std::string error = std::move(f->result.error);
      finish(std::move(f), reason, std::move(error));
      continue;
    }
    running_.push_back(std::move(f));
  }
}

bool Scheduler::ranks_before(const Sequence& a, const Sequence& b) {
  if (a.request.priority != b.request.priority) return a.request.priority > b.request.priority;
  return a.arrival < b.arrival;
}

void Scheduler::insert_waiting(std::unique_ptr<Sequence> s) {
  auto it = std::upper_bound(waiting_.begin(), waiting_.end(), s,
                             [](const auto& a, const auto& b) { return ranks_before(*a, *b); });
  waiting_.insert(it, std::move(s));
}

bool Scheduler::cancel(RequestId id) {
  // Every choice of the request.
  std::vector<std::unique_ptr<Sequence>> cancelled;
  auto take = [&](auto& queue) {
    for (auto it = queue.begin(); it != queue.end();)
      if ((*it)->id == id) {
        cancelled.push_back(std::move(*it));
        it = queue.erase(it);
      } else {
        ++it;
      }
  };
  take(waiting_);
  take(running_);
  for (auto& s : cancelled) finish(std::move(s), FinishReason::Cancelled);
  return !cancelled.empty();
}

void Scheduler::cancel_all() {
  while (!running_.empty()) cancel(running_.back()->id);
  while (!waiting_.empty()) cancel(waiting_.back()->id);
}

Status Scheduler::attach_cache(Sequence& s) {
  Session* session = nullptr;
  if (s.pooled) {
    // An embedding needs every row computed: it never continues a session.
  } else if (!s.request.session_id.empty()) {
    session = &sessions_->named(s.request.session_id);
  } else if (options_.keep_sessions && s.session_id.empty()) {
    session = sessions_->continuation(s.tokens, options_.page_tokens);
  } else if (!s.session_id.empty()) {
    session = sessions_->find(s.session_id);  // re-admitted after a preemption
  }
  if (session != nullptr) {
    s.session_id = session->id;
    const bool was_resident = session->cache != nullptr;
    sessions_->claim(*session);
    if (!was_resident && session->cache != nullptr && !s.admitted_once) s.restored_from_tier = true;
  }
  if (session != nullptr && session->cache) {
    size_t common = std::min(common_prefix(session->tokens, s.tokens), s.tokens.size() - 1);
    s.cache = std::move(session->cache);
    int64_t repositioned = 0;
    if (s.request.context_shift && !s.admitted_once) {
      // Only tokens whose KV the cache holds count (the session's last token may not be run).
      const std::span<const int32_t> held(
          session->tokens.data(),
          std::min<size_t>(session->tokens.size(), static_cast<size_t>(s.cache->n_positions())));
      if (auto shift = find_context_shift(held, s.tokens, common, kMinShiftKept)) {
        const Status st = s.cache->remove_positions(
            shift->from, shift->to, key_rotation(model_.rope(), model_.config().head_dim));
        if (st.ok()) {
          common = std::min(static_cast<size_t>(shift->from + shift->kept), s.tokens.size() - 1);
          repositioned = static_cast<int64_t>(common) - shift->from;
          ++counters_.context_shifts;
        } else {
          common = 0;  // half moved: start over in a fresh cache
          TG_ASSIGN(s.cache, PagedKvCache::create(model_.kv_shape(), context_, *pool_, map_));
        }
      }
    }
    s.cache->truncate(static_cast<int64_t>(common));
    if (!s.admitted_once) {
      s.result.usage.cached_tokens = static_cast<int64_t>(common);
      s.result.usage.repositioned_tokens = repositioned;
      if (s.restored_from_tier) s.result.usage.restored_tokens = static_cast<int64_t>(common);
    }
  } else {
    TG_ASSIGN(s.cache, PagedKvCache::create(model_.kv_shape(), context_, *pool_, map_));
  }
  s.compress_base = s.cache->n_positions();
  s.awaiting_sample = true;
  s.capture_rows = 0;
  return Status::Ok();
}

SessionTiers::Location Scheduler::session_location(const std::string& id) {
  const Session* s = sessions_->find(id);
  if (s != nullptr && s->busy) {
    const auto page_bytes = static_cast<int64_t>(pool_->geometry().page_bytes());
    for (const auto& q : running_)
      if (q->session_id == id && q->cache) return {"running", q->cache->pages_held() * page_bytes};
    return {"running", 0};
  }
  return sessions_->where(id);
}

bool Scheduler::drop_session(const std::string& id, RequestId cancel_before) {
  // A deleted conversation must not outlive its delete through a turn still running: the turn is
  // cancelled here and its pages freed, instead of returning them to the session and writing
  // the session to disk and Redis after the delete.
  auto of_session = [&](const std::unique_ptr<Sequence>& q) {
    return q->id < cancel_before && (q->session_id == id || q->request.session_id == id);
  };
  std::vector<std::unique_ptr<Sequence>> cancelled;
  auto take = [&](auto& queue) {
    for (auto it = queue.begin(); it != queue.end();)
      if (of_session(*it)) {
        cancelled.push_back(std::move(*it));
        it = queue.erase(it);
      } else {
        ++it;
      }
  };
  take(running_);
  take(waiting_);
  for (auto& q : cancelled) {
    q->session_dropped = true;
    finish(std::move(q), FinishReason::Cancelled, "the session was deleted");
  }
  // Its entry is busy now only with a request submitted after cancel_before, which keeps it.
  return sessions_->forget(id) || !cancelled.empty();
}

bool Scheduler::make_room(int64_t pages, const Sequence* keep, bool may_preempt) {
  while (pool_->free_pages() < pages) {
    if (sessions_->evict_one() >= 0) continue;
    if (!may_preempt || running_.empty() || running_.back().get() == keep) return false;
    // running_ is in rank order, so the back is the lowest-ranked sequence, below `keep`.
    auto victim = std::move(running_.back());
    running_.pop_back();
    preempt(*victim);
    insert_waiting(std::move(victim));
  }
  return true;
}

void Scheduler::preempt(Sequence& s) {
  ++s.result.usage.preemptions;
  ++counters_.preemptions;
  if (s.cache) s.result.usage.recomputed_tokens += s.cache->n_positions();
  s.cache.reset();  // every page back to the pool; the tokens are kept for the recompute
  s.chunk = 0;
}

void Scheduler::emit(Sequence& s, const std::string& text) { s.result.text += text; }

bool Scheduler::sample_next(Sequence& s, float* logits) {
  const auto vocab = static_cast<int>(model_.config().vocab);
  if (s.request.keep_first_logits && !s.first_token_done)
    s.result.first_logits.assign(logits, logits + vocab);
  const int n_vocab = std::min<int>(tokenizer_.n_vocab(), vocab);
  // Log-probabilities are the model's own: read before the sampler's penalties change the row.
  const bool logprobs = s.request.top_logprobs >= 0;
  if (logprobs) s.raw_logits.assign(logits, logits + n_vocab);
  const int32_t tok = sample_token(s, logits, n_vocab);
  s.awaiting_sample = false;
  if (!s.first_token_done) {
    s.first_token_done = true;
    s.first_token = Clock::now();
  }
  if (tok == kNoAllowedToken) {
    s.result.finish = FinishReason::Error;
    s.result.error = "constrained decoding: no token of the vocabulary can continue the output";
    return true;
  }
  if (tok < 0) return true;
  if (!s.request.params.ignore_eos && tokenizer_.is_eog(tok)) return true;
  if (s.constraint) s.constraint->accept(tok);
  s.sampler->accept(tok);
  s.tokens.push_back(tok);
  s.result.tokens.push_back(tok);
  const StopStringMatcher::Step out = s.stops->feed(s.decoder->push(tok));
  emit(s, out.text);
  if (s.request.on_token) {
    std::optional<TokenLogprob> lp;
    if (logprobs) lp = token_logprob(s.raw_logits, tok, s.request.top_logprobs);
    s.request.on_token(TokenEvent{s.id, s.choice, tok, out.text, lp ? &*lp : nullptr});
  }
  if (out.stopped) return true;
  if (s.constraint && s.constraint->must_end()) return true;  // the output is whole
  if (s.sampler->max_tokens_reached() || static_cast<int64_t>(s.tokens.size()) > context_) {
    s.result.finish = FinishReason::Length;
    return true;
  }
  return false;
}

int32_t Scheduler::sample_token(Sequence& s, float* logits, int n_vocab) {
  if (!s.constraint) return s.sampler->sample(logits, n_vocab, s.tokens);
  s.unmasked.assign(logits, logits + n_vocab);
  const int32_t drawn = s.sampler->sample(logits, n_vocab, s.tokens);
  if (drawn >= 0 && s.constraint->allows(drawn)) return drawn;
  std::copy(s.unmasked.begin(), s.unmasked.end(), logits);
  s.constraint->allowed_tokens(n_vocab, s.allowed);
  bool any = false;
  for (int i = 0; i < n_vocab; ++i) {
    if (s.allowed[static_cast<size_t>(i)] != 0)
      any = true;
    else
      logits[i] = -std::numeric_limits<float>::infinity();
  }
  if (!any) return kNoAllowedToken;
  const int32_t tok = s.sampler->sample(logits, n_vocab, s.tokens);
  // Every allowed logit may have been -inf (the model's, or a ban): nothing valid was drawn.
  return tok >= 0 && s.allowed[static_cast<size_t>(tok)] != 0 ? tok : kNoAllowedToken;
}

void Scheduler::finish(std::unique_ptr<Sequence> s, FinishReason reason, std::string error) {
  const auto now = Clock::now();
  if (reason != FinishReason::Error && !s->stops->stopped()) {
    std::string tail = s->stops->feed(s->decoder->flush()).text;
    tail += s->stops->flush();
    emit(*s, tail);
  }
  RequestResult& r = s->result;
  r.finish = reason;
  r.stop_index = s->stops->stop_index();
  r.error = std::move(error);
  r.usage.completion_tokens = static_cast<int64_t>(r.tokens.size());
  if (!s->admitted_once) s->admitted = now;
  if (!s->first_token_done) s->first_token = now;
  r.timing.queue_seconds = seconds_between(s->submitted, s->admitted);
  r.timing.prefill_seconds = seconds_between(s->admitted, s->first_token);
  r.timing.decode_seconds = seconds_between(s->first_token, now);
  r.timing.total_seconds = seconds_between(s->submitted, now);

  // The KV goes back to the session (tokens [0, n_positions) are in it), or to the pool.
  const bool keep = options_.keep_sessions && reason != FinishReason::Error && !s->pooled &&
                    !s->session_dropped && (s->choice == 0 || s->request.keep_other_choices);
  if (std::string id =
          sessions_->give_back(s->session_id, s->tokens, keep ? std::move(s->cache) : nullptr, now);
      !id.empty())
    r.session_id = std::move(id);
  s->cache.reset();
  ++counters_.finished;
  if (s->request.on_finish) s->request.on_finish(r);
  // Ended before its choices forked: they end too, with the same outcome and nothing generated.
  if (s->choice == 0 && !s->forked)
    for (int c = 1; c < s->request.n; ++c) report_unforked_choice(s->request, r, c);
}

void Scheduler::report_unforked_choice(const Request& request, const RequestResult& like,
                                       int choice) {
  RequestResult other;
  other.id = like.id;
  other.choice = choice;
  other.finish = like.finish;
  other.error = like.error;
  other.usage.prompt_tokens = like.usage.prompt_tokens;
  other.timing = like.timing;
  if (request.on_finish) request.on_finish(other);
}

int64_t Scheduler::step() {
  if (idle()) return 0;
  int64_t budget = options_.step_tokens;
  for (auto& s : running_) s->chunk = 0;
  plan_decode(budget);
  plan_prefill(budget);
  admit_waiting(budget);
  std::stable_sort(running_.begin(), running_.end(),
                   [](const auto& a, const auto& b) { return ranks_before(*a, *b); });
  std::vector<Sequence*> stepped;
  for (auto& s : running_)
    if (s->chunk > 0) stepped.push_back(s.get());
  if (stepped.empty()) {
    fail_unschedulable();
    return 0;
  }
  int64_t ran = 0;
  const Status st = run_planned(stepped, ran);
  finish_step(stepped, st);
  return ran;
}

bool Scheduler::plan_chunk(size_t i, int64_t chunk, int64_t& budget) {
  Sequence& s = *running_[i];
  const int64_t need = s.cache->pages_needed(s.cache->n_positions() + chunk);
  if ((need > 0 && !make_room(need, &s, /*may_preempt=*/true)) ||
      !s.cache->reserve(s.cache->n_positions() + chunk).ok()) {
    auto self = std::move(running_[i]);
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
    if (running_.empty()) {
      // Alone and still short: its conversation has outgrown the whole pool.
      finish(std::move(self), FinishReason::Length);
    } else {
      preempt(*self);
      insert_waiting(std::move(self));
    }
    return false;
  }
  s.chunk = chunk;
  budget -= chunk;
  return true;
}

void Scheduler::plan_decode(int64_t& budget) {
  // One decode token each, in rank order.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence& s = *running_[i];
    const int64_t left = static_cast<int64_t>(s.tokens.size()) - s.cache->n_positions();
    if (left != 1 || plan_chunk(i, 1, budget)) ++i;
  }
}

int64_t Scheduler::prefill_chunk(const Sequence& s, int64_t budget) const {
  const int64_t pos = s.cache->n_positions();
  const int64_t left = static_cast<int64_t>(s.tokens.size()) - pos;
  int64_t chunk = std::min({left, options_.prefill_chunk, budget});
  if (const int64_t point = next_compression_point(s); point > pos)
    chunk = std::min(chunk, point - pos);  // stop at the compression point
  return chunk;
}

void Scheduler::plan_prefill(int64_t& budget) {
  // Prefill chunks of running sequences still reading their input.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence& s = *running_[i];
    const int64_t left = static_cast<int64_t>(s.tokens.size()) - s.cache->n_positions();
    if (left <= 1 || s.chunk > 0) {
      ++i;
      continue;
    }
    if (plan_chunk(i, prefill_chunk(s, budget), budget)) ++i;
  }
}

void Scheduler::admit_waiting(int64_t& budget) {
  // In rank order, while budget and memory last, never preempting. A request whose session is
  // lent to another request waits for it.
  while (budget > 0 && static_cast<int>(running_.size()) < options_.max_running) {
    auto it = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& w) {
      if (w->request.session_id.empty()) return true;
      const Session* ses = sessions_->find(w->request.session_id);
      return ses == nullptr || !ses->busy || w->session_id == ses->id;  // its own session
    });
    if (it == waiting_.end()) break;
    Sequence& s = **it;
    if (Status st = attach_cache(s); !st.ok()) {
      auto failed = std::move(*it);
      waiting_.erase(it);
      finish(std::move(failed), FinishReason::Error, st.error().message);
      continue;
    }
    if (!admit(s, budget)) break;
    auto moved = std::move(*it);
    waiting_.erase(it);
    running_.push_back(std::move(moved));
  }
}

bool Scheduler::admit(Sequence& s, int64_t& budget) {
  const int64_t chunk = prefill_chunk(s, budget);
  const AdmissionView candidate = admission_view(s);
  std::vector<AdmissionView> others;
  others.reserve(running_.size());
  for (const auto& r : running_) others.push_back(admission_view(*r));
  const int64_t watermark = map_->total_groups();  // one page per group for the others' growth
  int64_t need =
      admission_->pages_to_admit(candidate, chunk, others, watermark, pool_->total_pages());
  // n choices not yet forked: each fork may copy the partly filled last page of every group.
  if (s.choice == 0 && !s.forked) need += int64_t{s.request.n - 1} * map_->total_groups();
  if (!make_room(need, nullptr, /*may_preempt=*/false)) {
    // Not now: the cache goes back where it came from, the request keeps its place.
    if (Session* ses = s.session_id.empty() ? nullptr : sessions_->find(s.session_id);
        ses != nullptr)
      sessions_->unclaim(*ses, s.tokens, std::move(s.cache));
    s.cache.reset();
    if (s.request.session_id.empty()) s.session_id.clear();
    return false;
  }
  (void)s.cache->reserve(admission_->target(candidate, chunk));
  s.chunk = chunk;
  budget -= chunk;
  if (!s.admitted_once) {
    s.admitted_once = true;
    s.admitted = Clock::now();
  }
  return true;
}

void Scheduler::fail_unschedulable() {
  // Nothing runs and nothing could be admitted into an empty pool: the head request can never
  // run (validate() rules this out; kept so that no request can hang the loop).
  if (running_.empty() && !waiting_.empty()) {
    auto s = std::move(waiting_.front());
    waiting_.pop_front();
    finish(std::move(s), FinishReason::Error,
           "the request cannot be scheduled: KV memory too small");
  }
}

Status Scheduler::run_planned(const std::vector<Sequence*>& stepped, int64_t& ran) {
  // Every planned chunk in one batched forward pass.
  const auto vocab = static_cast<size_t>(model_.config().vocab);
  steps_.clear();
  try {
    if (logits_.size() < stepped.size() * vocab) logits_.resize(stepped.size() * vocab);
  } catch (const std::bad_alloc&) {
    logits_.clear();
  }
  for (size_t i = 0; i < stepped.size(); ++i) {
    Sequence& s = *stepped[i];
    const int64_t pos0 = s.cache->n_positions();
    const bool ends_input = pos0 + s.chunk == static_cast<int64_t>(s.tokens.size());
    float* out = ends_input && !logits_.empty() && !s.pooled ? logits_.data() + i * vocab : nullptr;
    float* hidden = nullptr;
    if (s.pooled) {
      try {
        s.hidden.resize(static_cast<size_t>(s.chunk) * static_cast<size_t>(model_.config().n_embd));
        hidden = s.hidden.data();
      } catch (const std::bad_alloc&) {
        logits_.clear();  // fails the step below with a clear error
      }
    }
    prepare_capture(s, s.chunk);
    steps_.push_back(SequenceStep{s.cache.get(), s.tokens.data() + pos0, s.chunk, pos0, out, false,
                                  s.capture_rows > 0 ? s.capture.data() : nullptr, s.capture_from,
                                  s.capture_rows, hidden});
    ran += s.chunk;
  }
  Status st = logits_.empty() ? make_error("out of host memory for the step's logits")
                              : model_.forward_step(steps_, pool_threads_);
  ++counters_.steps;
  return st;
}

void Scheduler::finish_step(const std::vector<Sequence*>& stepped, const Status& st) {
  auto take = [&](const Sequence* p) {
    auto it =
        std::find_if(running_.begin(), running_.end(), [p](const auto& u) { return u.get() == p; });
    auto owned = std::move(*it);
    running_.erase(it);
    return owned;
  };
  if (!st.ok()) {
    for (Sequence* p : stepped) finish(take(p), FinishReason::Error, st.error().message);
    return;
  }
  for (size_t i = 0; i < stepped.size(); ++i) {
    Sequence& s = *stepped[i];
    if (s.chunk == 1 && s.first_token_done)
      ++counters_.decode_tokens;
    else
      counters_.prefill_tokens += s.chunk;
    const SequenceStep& done = steps_[i];
    s.chunk = 0;
    if (const int64_t point = next_compression_point(s);
        point >= 0 && s.cache->n_positions() == point)
      compress_sequence(s);
    if (s.pooled) {
      s.pooled->add(done.hidden, done.n, done.pos0);
      if (s.cache->n_positions() < static_cast<int64_t>(s.tokens.size())) continue;
      s.result.embedding = s.pooled->normalized();
      finish(take(&s), FinishReason::Stop);
      continue;
    }
    if (done.logits == nullptr) continue;
    if (s.request.n > 1 && s.choice == 0 && !s.forked) fork_choices(s, done.logits);
    s.result.finish = FinishReason::Stop;
    if (!sample_next(s, done.logits)) continue;
    auto owned = take(&s);
    const FinishReason reason = owned->result.finish;
    std::string error = std::move(owned->result.error);
    finish(std::move(owned), reason, std::move(error));
  }
}

void Scheduler::run_until_idle() {
  while (!idle()) step();
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats st = counters_;
  st.running = static_cast<int>(running_.size());
  st.waiting = static_cast<int>(waiting_.size());
  st.sessions = sessions_->size();
  st.resident_sessions = sessions_->resident();
  st.session_evictions = sessions_->evictions();
  st.pool = pool_->stats();
  st.tiers = sessions_->tier_stats();
  return st;
}

}  // namespace tangram
