#include "scheduler/scheduler.h"

#include "kv/session_codec.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <new>

#include "common/units.h"

namespace tangram {

namespace {

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

Scheduler::Scheduler(Model& model, const Tokenizer& tokenizer, ThreadPool& pool,
                     const SchedulerOptions& options)
    : model_(model), tokenizer_(tokenizer), pool_threads_(pool), options_(options),
      sessions_(std::max<size_t>(options.max_sessions, 1)) {}

Scheduler::~Scheduler() = default;

Result<std::unique_ptr<Scheduler>> Scheduler::create(Model& model, const Tokenizer& tokenizer,
                                                     ThreadPool& pool,
                                                     const SchedulerOptions& options) {
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

  std::unique_ptr<Scheduler> s(new Scheduler(model, tokenizer, pool, options));
  if (!s->options_.warn)
    s->options_.warn = [](const std::string& m) { fmt::print(stderr, "level=warn event=kv_tier msg=\"{}\"\n", m); };
  s->options_.page_group_size = G;
  s->options_.max_running = static_cast<int>(std::min<int64_t>(options.max_running, options.step_tokens));
  s->context_ = options.max_context > 0 ? std::min(options.max_context, c.context_length)
                                        : c.context_length;
  s->map_ = compressor->group_map();
  s->compressor_ = std::move(compressor);
  const bool tiered = options.kv_host_memory > 0 || !options.kv_disk_dir.empty() || !options.kv_redis.empty();
  if (options.kv_idle_offload_seconds < 0) return make_error("--kv-idle-offload must be 0 (off) or positive seconds");
  if (options.kv_idle_offload_seconds > 0 && !tiered)
    return make_error("--kv-idle-offload needs a tier to move idle sessions to: give --kv-host-memory, --kv-disk or "
                      "--kv-redis");
  if (tiered) {
    const CompressionOptions& co = options.compression;
    // The policy's settings and profile decide which entries a compressed cache holds.
    std::string policy = fmt::format("{} {} {} {} {} {} {}", kv_policy_name(co.policy), co.ratio, co.alpha, co.sink,
                                     co.window, co.chunk, co.scorer.name);
    for (const std::string& f : {co.profile, co.cluster_map}) {
      if (f.empty()) continue;
      std::ifstream in(f, std::ios::binary);
      std::ostringstream bytes;
      bytes << in.rdbuf();
      policy += bytes.str();
    }
    s->fingerprint_ = SessionFingerprint{model_fingerprint(model.gguf()), options.kv_type, bytes_fingerprint(policy),
                                         group_map_fingerprint(*s->map_)};
    SessionTierOptions to;
    to.host_bytes = options.kv_host_memory;
    to.disk_dir = options.kv_disk_dir;
    to.disk_bytes = options.kv_disk_bytes;
    if (!options.kv_redis.empty()) {
      RedisStoreOptions ro;
      TG_ASSIGN(ro.endpoint, parse_redis_url(options.kv_redis));
      // Replicas of one deployment (same model, KV type, policy and layout) share a namespace.
      const SessionFingerprint& f = s->fingerprint_;
      const uint64_t ns = bytes_fingerprint(fmt::format("{:016x} {} {:016x} {:016x}", f.model,
                                                        static_cast<int>(f.kv_type), f.profile, f.group_map));
      ro.key_prefix = options.kv_redis_prefix.empty() ? fmt::format("tangram:{:016x}:", ns) : options.kv_redis_prefix;
      ro.ttl_seconds = options.kv_redis_ttl_seconds;
      ro.warn = s->options_.warn;
      to.redis = std::move(ro);
    }
    TG_ASSIGN(s->tiers_, SessionTiers::create(std::move(to)));
    // Sessions a previous run left on disk: known again, restored on their next turn.
    for (auto& [id, tokens] : s->tiers_->disk_sessions())
      s->sessions_.get_or_create(id, /*anonymous=*/false).tokens = std::move(tokens);
  }
  // The tangram policy splits decode attention ahead of time; the others plan every step.
  model.attention_planner().set_split(options.attention_split.value_or(
      options.compression.policy == KvPolicy::Tangram ? AttentionSplit::AheadOfTime : AttentionSplit::Runtime));
  if (s->compressor_->scorer().query_source() == QuerySource::Reconstruction)
    s->repeat_prompt_ = tokenizer.encode("\n\nRepeat the previous context exactly.\n", false, false);
  if (options.kv_memory < geometry.page_bytes() * static_cast<size_t>(s->map_->total_groups()))
    return make_error("--kv-memory {} cannot hold even one page per head group ({} groups x {}): "
                      "give at least {}",
                      format_bytes(static_cast<double>(options.kv_memory)), s->map_->total_groups(),
                      format_bytes(static_cast<double>(geometry.page_bytes())),
                      format_bytes(static_cast<double>(geometry.page_bytes()) * s->map_->total_groups()));
  TG_ASSIGN(s->pool_, BlockPool::create(geometry, options.kv_memory, options.prefault));
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id)
    if (tokenizer.is_eog(id)) s->eos_ids_.push_back(id);
  return s;
}

int64_t Scheduler::pages_for(int64_t n_total) const {
  return ceil_div(n_total, options_.page_tokens) * map_->total_groups();
}

Status Scheduler::validate(const Request& r) const {
  if (r.prompt.empty()) return make_error("the prompt is empty: give at least one token");
  const auto vocab = static_cast<int>(model_.config().vocab);
  for (size_t i = 0; i < r.prompt.size(); ++i)
    if (r.prompt[i] < 0 || r.prompt[i] >= vocab)
      return make_error("token id {} at prompt index {} is outside the vocabulary [0, {})",
                        r.prompt[i], i, vocab);
  const auto n = static_cast<int64_t>(r.prompt.size());
  if (n >= context_)
    return make_error("the prompt has {} tokens but the context holds {}: shorten it by at least {}",
                      n, context_, n - context_ + 1);
  const int64_t need = pages_for(n + 1);
  if (need > pool_->total_pages())
    return make_error("the prompt's KV needs {} ({} pages) but the KV memory holds {} ({} pages): "
                      "raise --kv-memory or shorten the prompt",
                      format_bytes(static_cast<double>(need) * static_cast<double>(pool_->page_bytes())), need,
                      format_bytes(static_cast<double>(pool_->total_pages()) * static_cast<double>(pool_->page_bytes())),
                      pool_->total_pages());
  return r.params.validate();
}

Result<RequestId> Scheduler::submit(Request request) {
  const RequestId id = next_id_;
  TG_TRY(submit_with_id(id, std::move(request)));  // advances next_id_
  return id;
}

Status Scheduler::submit_with_id(RequestId id, Request request) {
  TG_TRY(validate(request));
  auto s = std::make_unique<Sequence>();
  TG_ASSIGN(Sampler sampler, Sampler::create(request.params));
  sampler.set_eos_tokens(eos_ids_);
  s->sampler.emplace(std::move(sampler));
  s->id = id;
  s->arrival = next_arrival_++;
  s->tokens = request.prompt;
  s->n_prompt = request.prompt.size();
  s->decoder = std::make_unique<StreamDecoder>(tokenizer_);
  s->stops = std::make_unique<StopStringMatcher>(request.params.stop);
  s->result.id = id;
  s->result.usage.prompt_tokens = static_cast<int64_t>(s->n_prompt);
  s->result.seed = s->sampler->seed();
  s->submitted = Clock::now();
  s->request = std::move(request);
  next_id_ = std::max(next_id_, id + 1);
  if (tiers_ && !s->request.session_id.empty()) {
    // Its KV is read from disk or Redis while the request waits, not at admission.
    const Session* session = sessions_.find(s->request.session_id);
    if (session == nullptr || (!session->cache && !session->busy)) tiers_->prefetch(s->request.session_id);
  }
  insert_waiting(std::move(s));
  return Status::Ok();
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
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if ((*it)->id != id) continue;
    auto s = std::move(*it);
    waiting_.erase(it);
    finish(std::move(s), FinishReason::Cancelled);
    return true;
  }
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    if ((*it)->id != id) continue;
    auto s = std::move(*it);
    running_.erase(it);
    finish(std::move(s), FinishReason::Cancelled);
    return true;
  }
  return false;
}

void Scheduler::cancel_all() {
  while (!running_.empty()) cancel(running_.back()->id);
  while (!waiting_.empty()) cancel(waiting_.back()->id);
}

Status Scheduler::attach_cache(Sequence& s) {
  Session* session = nullptr;
  if (!s.request.session_id.empty()) {
    session = &sessions_.get_or_create(s.request.session_id, /*anonymous=*/false);
  } else if (options_.keep_sessions && s.session_id.empty()) {
    session = sessions_.match_prefix(s.tokens, options_.page_tokens);
  } else if (!s.session_id.empty()) {
    session = sessions_.find(s.session_id);  // re-admitted after a preemption
  }
  if (session != nullptr) {
    s.session_id = session->id;
    session->busy = true;
    if (!session->cache) restore_session(*session);
  }
  if (session != nullptr && session->cache) {
    const size_t common = std::min(common_prefix(session->tokens, s.tokens), s.tokens.size() - 1);
    s.cache = std::move(session->cache);
    s.cache->truncate(static_cast<int64_t>(common));
    if (!s.admitted_once) s.result.usage.cached_tokens = static_cast<int64_t>(common);
  } else {
    TG_ASSIGN(s.cache, PagedKvCache::create(model_.kv_shape(), context_, *pool_, map_));
  }
  s.compress_base = s.cache->n_positions();
  s.awaiting_sample = true;
  s.capture_rows = 0;
  return Status::Ok();
}

int64_t Scheduler::next_compression_point(const Sequence& s) const {
  const CompressionOptions& co = compressor_->options();
  if (!co.compresses() || !s.cache || !s.awaiting_sample) return -1;
  // First-turn-only: a conversation whose cache held tokens when this request began is past
  // its first turn (its first prefill started from an empty cache).
  if (co.first_turn_only && s.result.usage.cached_tokens > 0) return -1;
  const auto end = static_cast<int64_t>(s.tokens.size());
  return std::min(end, s.compress_base + co.chunk);
}

int64_t Scheduler::admission_target(const Sequence& s, int64_t chunk) const {
  const int64_t pos = s.cache->n_positions();
  const CompressionOptions& co = compressor_->options();
  if (!co.compresses()) return pos + chunk;
  if (co.policy == KvPolicy::Tangram) return std::max(pos + chunk, next_compression_point(s));
  return static_cast<int64_t>(s.tokens.size());
}

int64_t Scheduler::committed_pages(const Sequence& s) const {
  const CompressionOptions& co = compressor_->options();
  if (co.policy != KvPolicy::Tangram || !co.compresses() || !s.cache) return -1;
  const HeadGroupMap& map = *map_;
  const int H = model_.config().n_kv_head;
  const int64_t P = options_.page_tokens;
  // Pages of every group holding `entries(group)` entries.
  auto pages = [&](const auto& entries) {
    int64_t n = 0;
    for (int g = 0; g < map.total_groups(); ++g) n += (entries(g) + P - 1) / P;
    return n;
  };
  auto group_len = [&](const std::vector<int64_t>& per_head, int g) {
    return map.group_max(g, std::span<const int64_t>(per_head));
  };
  std::vector<int64_t> now(static_cast<size_t>(map.n_layers()) * static_cast<size_t>(H));
  for (int l = 0; l < map.n_layers(); ++l)
    for (int h = 0; h < H; ++h) now[static_cast<size_t>(l * H + h)] = s.cache->length(l, h);
  const int64_t pos = s.cache->n_positions();
  const auto end = static_cast<int64_t>(s.tokens.size());
  int64_t peak = s.cache->pages_held();
  // Prefill intervals: the first grows what the cache holds now, later ones the compressed length.
  if (next_compression_point(s) >= 0) {
    for (int64_t p = s.compress_base, first = 1; p < end; first = 0) {
      const int64_t next = std::min(end, p + co.chunk);
      const int64_t added = next - std::max(p, pos);
      if (added > 0) {
        const std::vector<int64_t> base = first ? now : compressor_->target_lengths(p);
        peak = std::max(peak, pages([&](int g) { return group_len(base, g) + added; }));
      }
      p = next;
    }
  }
  // After the prompt: the compressed prompt plus every token the request may still generate.
  const int64_t max_new = s.request.params.max_tokens > 0
                              ? s.request.params.max_tokens - static_cast<int64_t>(s.result.tokens.size())
                              : context_ - end;
  const std::vector<int64_t> after = next_compression_point(s) >= 0 ? compressor_->target_lengths(end) : now;
  const int64_t grow = std::max<int64_t>(0, max_new) + (next_compression_point(s) >= 0 ? 0 : end - pos);
  peak = std::max(peak, pages([&](int g) { return group_len(after, g) + grow; }));
  return peak;
}

void Scheduler::prepare_capture(Sequence& s, int64_t chunk) {
  const int64_t point = next_compression_point(s);
  if (point < 0 || compressor_->scorer().query_source() != QuerySource::Observation) {
    s.capture_rows = 0;
    return;
  }
  (void)chunk;
  // The last queries_wanted positions before the point, but only rows this admission computes
  // (earlier turns' queries are gone).
  const int64_t want = compressor_->queries_wanted(point);
  const int64_t from = std::max(point - want, s.compress_base);
  const int64_t rows = point - from;
  if (from != s.capture_from || rows != s.capture_rows) {
    s.capture_from = from;
    s.capture_rows = rows;
    const ModelConfig& c = model_.config();
    s.capture.assign(static_cast<size_t>(c.n_layers) * static_cast<size_t>(rows) *
                         static_cast<size_t>(c.q_dim()), 0.0f);
  }
}

Status Scheduler::reconstruction_queries(Sequence& s, std::vector<float>& queries, int64_t& n_rows,
                                         int64_t& pos0) {
  PagedKvCache& cache = *s.cache;
  const int64_t point = cache.n_positions();
  // The most recent context tokens are repeated, as many as the context has room for.
  const int64_t room = std::min(cache.capacity(), model_.config().context_length) - point -
                       static_cast<int64_t>(repeat_prompt_.size());
  const int64_t r = std::min({compressor_->options().reconstruction_tokens, point, room});
  if (r < 1) return make_error("no context left for the reconstruction pass");
  std::vector<int32_t> pass = repeat_prompt_;
  pass.insert(pass.end(), s.tokens.begin() + (point - r), s.tokens.begin() + point);
  const auto n = static_cast<int64_t>(pass.size());
  if (point + n > std::min(cache.capacity(), model_.config().context_length))
    return make_error("no context left for the reconstruction pass");
  if (!make_room(cache.pages_needed(point + n), &s, /*may_preempt=*/false))
    return make_error("no KV memory for the reconstruction pass");
  const ModelConfig& c = model_.config();
  n_rows = r;
  pos0 = point + static_cast<int64_t>(repeat_prompt_.size());
  queries.assign(static_cast<size_t>(c.n_layers) * static_cast<size_t>(r) * static_cast<size_t>(c.q_dim()), 0.0f);
  Status st = Status::Ok();
  for (int64_t done = 0; done < n && st.ok();) {
    const int64_t m = std::min(options_.step_tokens, n - done);
    const SequenceStep step{&cache, pass.data() + done, m, point + done, nullptr, false,
                            queries.data(), pos0, r};
    st = model_.forward_step(std::span<const SequenceStep>(&step, 1), pool_threads_);
    done += m;
  }
  cache.truncate(point);  // the pass leaves nothing behind
  return st;
}

void Scheduler::compress_sequence(Sequence& s) {
  const int64_t point = s.cache->n_positions();
  const QuerySource src = compressor_->scorer().query_source();
  const float* q = nullptr;
  int64_t n_q = 0, q_pos0 = 0;
  std::vector<float> recon;
  if (src == QuerySource::Observation) {
    q = s.capture.data();
    n_q = s.capture_rows;
    q_pos0 = s.capture_from;
  } else if (src == QuerySource::Reconstruction) {
    const auto t0 = Clock::now();
    if (Status st = reconstruction_queries(s, recon, n_q, q_pos0); !st.ok()) {
      ++counters_.compression_skipped;
      s.compress_base = point;
      return;
    }
    s.result.compression.seconds += seconds_between(t0, Clock::now());
    q = recon.data();
  }
  auto rep = compressor_->compress(*s.cache, q, n_q, q_pos0, pool_threads_);
  s.compress_base = point;
  s.capture_rows = 0;
  if (!rep) {
    ++counters_.compression_skipped;
    return;
  }
  RequestCompression& rc = s.result.compression;
  ++rc.compressions;
  rc.entries_before = rep->entries_before;
  rc.entries_after = rep->entries_after;
  rc.pages_freed += rep->pages_before - rep->pages_after;
  rc.seconds += rep->score_seconds + rep->compact_seconds;
  ++counters_.compressions;
  counters_.entries_dropped += rep->entries_before - rep->entries_after;
  counters_.pages_freed += rep->pages_before - rep->pages_after;
  counters_.compress_seconds += rep->score_seconds + rep->compact_seconds;
  counters_.reclaim_seconds += rep->compact_seconds;
  counters_.heads_compressed += rep->heads;
  counters_.heads_pressured += rep->pressured_heads;
}

int64_t Scheduler::evict_one() {
  if (!tiers_) return sessions_.evict_lru();
  Session* victim = sessions_.lru_idle_resident();
  if (victim == nullptr) return -1;
  return offload_session(*victim);
}

int64_t Scheduler::offload_session(Session& victim) {
  const auto t0 = Clock::now();
  if (encode_session_into(*victim.cache, victim.tokens, fingerprint_, spill_buffer_).ok())
    tiers_->offload(victim.id, spill_buffer_);
  tiers_->counters().offload_seconds += seconds_between(t0, Clock::now());
  const int64_t pages = victim.cache->pages_held();
  victim.cache.reset();
  sessions_.count_eviction();
  return pages;
}

int64_t Scheduler::offload_idle_sessions(Clock::time_point now) {
  if (!tiers_ || options_.kv_idle_offload_seconds <= 0) return 0;
  const auto cutoff = now - std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(options_.kv_idle_offload_seconds));
  int64_t moved = 0;
  for (Session* s : sessions_.idle_resident_before(cutoff)) {
    offload_session(*s);
    ++moved;
  }
  return moved;
}

std::optional<std::chrono::steady_clock::duration> Scheduler::housekeeping_period() const {
  if (!tiers_ || (options_.kv_idle_offload_seconds <= 0 && !tiers_->writes_through())) return std::nullopt;
  // Idle offload is checked at a tenth of the idle time (at least every second), so a session
  // moves within about 10% of its deadline without the engine scanning sessions on every wake-up.
  const double period = options_.kv_idle_offload_seconds > 0 ? std::min(1.0, options_.kv_idle_offload_seconds / 10) : 1.0;
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(period));
}

bool Scheduler::restore_session(Session& session) {
  if (!tiers_ || session.cache) return false;
  const auto t0 = Clock::now();
  std::optional<SessionTiers::Fetched> fetched = tiers_->fetch(session.id);
  if (!fetched) {
    if (!session.tokens.empty()) ++tiers_->counters().recomputes;
    return false;
  }
  std::string& blob = fetched->blob;
  // Room for the session as if uncompressed (an upper bound); idle sessions move down for it.
  auto summary = inspect_session(blob);
  if (!summary) {
    ++tiers_->counters().restore_failures;
    tiers_->erase(session.id);
    return false;
  }
  const auto n = static_cast<int64_t>(summary->tokens.size());
  const int64_t P = options_.page_tokens;
  const int64_t uncompressed_pages = map_->total_groups() * ((n + P - 1) / P);
  if (n > context_ || !make_room(uncompressed_pages, nullptr, /*may_preempt=*/false)) {
    if (std::string_view(fetched->tier) == "host") tiers_->offload(session.id, std::move(blob));  // stays in a tier
    return false;
  }
  auto decoded = decode_session(blob, fingerprint_, *pool_, map_, model_.kv_shape(), context_);
  tiers_->counters().restore_seconds += seconds_between(t0, Clock::now());
  if (!decoded) {
    // Another model or policy, or a damaged blob: never served; the turn is recomputed.
    ++tiers_->counters().restore_failures;
    options_.warn(fmt::format("session {} from the {} tier not restored: {}", session.id, fetched->tier, decoded.message()));
    tiers_->erase(session.id);
    return false;
  }
  SessionTierStats& c = tiers_->counters();
  ++c.restores;
  const std::string_view tier = fetched->tier;
  ++(tier == "host" ? c.restores_host : tier == "disk" ? c.restores_disk : c.restores_redis);
  session.cache = std::move(decoded->cache);
  session.tokens = std::move(decoded->tokens);
  return true;
}

void Scheduler::persist_session(const Session& session) {
  if (!tiers_ || !tiers_->writes_through() || !session.cache) return;
  const auto t0 = Clock::now();
  // A blob of its own (not spill_buffer_): the I/O thread keeps it until it is written.
  std::string blob;
  if (encode_session_into(*session.cache, session.tokens, fingerprint_, blob).ok())
    tiers_->persist(session.id, std::move(blob));
  tiers_->counters().offload_seconds += seconds_between(t0, Clock::now());
}

std::vector<std::pair<std::string, std::vector<int32_t>>> Scheduler::named_sessions() const {
  std::vector<std::pair<std::string, std::vector<int32_t>>> out;
  sessions_.for_each([&](const Session& s) {
    if (!s.anonymous) out.emplace_back(s.id, s.tokens);
  });
  return out;
}

bool Scheduler::wait_session_written(const std::string& id, std::chrono::milliseconds timeout) const {
  return tiers_ == nullptr || tiers_->wait_written(id, timeout);  // tiers_ is fixed after create()
}

void Scheduler::flush_tiers() {
  if (tiers_) tiers_->flush();
}

int64_t Scheduler::evict_idle_sessions() {
  int64_t freed = 0;
  for (int64_t p; (p = evict_one()) >= 0;) freed += p;
  return freed;
}

SessionTiers::Location Scheduler::session_location(const std::string& id) {
  const Session* s = sessions_.find(id);
  const auto page_bytes = static_cast<int64_t>(pool_->geometry().page_bytes());
  if (s != nullptr && s->busy) {
    for (const auto& q : running_)
      if (q->session_id == id && q->cache) return {"running", q->cache->pages_held() * page_bytes};
    return {"running", 0};
  }
  if (s != nullptr && s->cache) return {"resident", s->cache->pages_held() * page_bytes};
  if (tiers_) return tiers_->where(id);
  return {};
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
  const bool known = sessions_.find(id) != nullptr || !cancelled.empty();
  for (auto& q : cancelled) {
    q->session_dropped = true;
    finish(std::move(q), FinishReason::Cancelled, "the session was deleted");
  }
  if (tiers_) tiers_->erase(id);
  // Busy only with a request submitted after cancel_before; that one starts it afresh.
  if (const Session* s = sessions_.find(id); s != nullptr && !s->busy) sessions_.erase(id);
  return known;
}

bool Scheduler::make_room(int64_t pages, const Sequence* keep, bool may_preempt) {
  while (pool_->free_pages() < pages) {
    if (evict_one() >= 0) continue;
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

void Scheduler::emit(Sequence& s, const std::string& text) {
  s.result.text += text;
}

bool Scheduler::sample_next(Sequence& s, float* logits) {
  const auto vocab = static_cast<int>(model_.config().vocab);
  if (s.request.keep_first_logits && !s.first_token_done) s.result.first_logits.assign(logits, logits + vocab);
  const int n_vocab = std::min<int>(tokenizer_.n_vocab(), vocab);
  const int32_t tok = s.sampler->sample(logits, n_vocab, s.tokens);
  s.awaiting_sample = false;
  if (!s.first_token_done) {
    s.first_token_done = true;
    s.first_token = Clock::now();
  }
  if (tok < 0) return true;
  if (!s.request.params.ignore_eos && tokenizer_.is_eog(tok)) return true;
  s.sampler->accept(tok);
  s.tokens.push_back(tok);
  s.result.tokens.push_back(tok);
  const StopStringMatcher::Step out = s.stops->feed(s.decoder->push(tok));
  emit(s, out.text);
  if (s.request.on_token) s.request.on_token(TokenEvent{s.id, tok, out.text});
  if (out.stopped) return true;
  if (s.sampler->max_tokens_reached() || static_cast<int64_t>(s.tokens.size()) > context_) {
    s.result.finish = FinishReason::Length;
    return true;
  }
  return false;
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
  r.error = std::move(error);
  r.usage.completion_tokens = static_cast<int64_t>(r.tokens.size());
  if (!s->admitted_once) s->admitted = now;
  if (!s->first_token_done) s->first_token = now;
  r.timing.queue_seconds = seconds_between(s->submitted, s->admitted);
  r.timing.prefill_seconds = seconds_between(s->admitted, s->first_token);
  r.timing.decode_seconds = seconds_between(s->first_token, now);
  r.timing.total_seconds = seconds_between(s->submitted, now);

  // The KV goes back to the session (tokens [0, n_positions) are in it), or to the pool.
  Session* session = s->session_id.empty() ? nullptr : sessions_.find(s->session_id);
  if (s->cache && options_.keep_sessions && reason != FinishReason::Error && !s->session_dropped) {
    if (session == nullptr) session = &sessions_.get_or_create(sessions_.new_anonymous_id(), true);
    s->cache->truncate(s->cache->n_positions());  // hands back pages reserved beyond the end
    session->tokens.assign(s->tokens.begin(), s->tokens.begin() + s->cache->n_positions());
    session->cache = std::move(s->cache);
    persist_session(*session);
  } else if (session != nullptr) {
    session->tokens.clear();
  }
  if (session != nullptr) {
    session->busy = false;
    session->last_used = ++tick_;
    session->idle_since = now;
    r.session_id = session->id;
  }
  s->cache.reset();
  ++counters_.finished;
  if (s->request.on_finish) s->request.on_finish(r);
}

int64_t Scheduler::step() {
  if (idle()) return 0;
  int64_t budget = options_.step_tokens;
  const int64_t watermark = map_->total_groups();  // one page per group for others' growth

  // Plans running_[i] for `chunk` more tokens; preempts lower-ranked sequences when short of
  // pages. Returns false when running_[i] itself had to leave running_.
  auto plan = [&](size_t i, int64_t chunk) -> bool {
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
  };

  for (auto& s : running_) s->chunk = 0;
  // Pass 1: decode tokens (one each), in rank order.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence& s = *running_[i];
    const int64_t left = static_cast<int64_t>(s.tokens.size()) - s.cache->n_positions();
    if (left != 1 || plan(i, 1)) ++i;
  }
  // Pass 2: prefill chunks of running sequences.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence& s = *running_[i];
    const int64_t left = static_cast<int64_t>(s.tokens.size()) - s.cache->n_positions();
    if (left <= 1 || s.chunk > 0) {
      ++i;
      continue;
    }
    int64_t chunk = std::min({left, options_.prefill_chunk, budget});
    if (const int64_t point = next_compression_point(s); point > s.cache->n_positions())
      chunk = std::min(chunk, point - s.cache->n_positions());  // stop at the compression point
    if (plan(i, chunk)) ++i;
  }
  // Pass 3: admissions, in rank order, while budget and memory last (never preempting).
  while (budget > 0 && static_cast<int>(running_.size()) < options_.max_running) {
    auto it = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& w) {
      if (w->request.session_id.empty()) return true;
      const Session* ses = sessions_.find(w->request.session_id);
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
    const int64_t left = static_cast<int64_t>(s.tokens.size()) - s.cache->n_positions();
    int64_t chunk = std::min({left, options_.prefill_chunk, budget});
    if (const int64_t point = next_compression_point(s); point > s.cache->n_positions())
      chunk = std::min(chunk, point - s.cache->n_positions());
    const int64_t target = admission_target(s, chunk);
    int64_t need = s.cache->pages_needed(target) + (running_.empty() ? 0 : watermark);
    if (const int64_t commit = committed_pages(s); commit >= 0) {
      // Deterministic admission: the request's whole closed-form footprint must fit beside
      // what the running requests are already committed to, so none of them is preempted later.
      int64_t outstanding = 0;
      for (const auto& r : running_)
        if (const int64_t c = committed_pages(*r); c >= 0) outstanding += std::max<int64_t>(0, c - r->cache->pages_held());
      need = std::max(need, outstanding + commit - s.cache->pages_held());
      if (commit - s.cache->pages_held() > pool_->total_pages()) need = s.cache->pages_needed(target);  // never fits whole: fall back
    }
    if (!make_room(need, nullptr, /*may_preempt=*/false)) {
      // Not now: the cache goes back where it came from, the request keeps its place.
      Session* ses = s.session_id.empty() ? nullptr : sessions_.find(s.session_id);
      if (ses != nullptr && !ses->cache && s.cache->n_positions() > 0) {
        ses->tokens.assign(s.tokens.begin(), s.tokens.begin() + s.cache->n_positions());
        ses->cache = std::move(s.cache);
      }
      if (ses != nullptr) ses->busy = false;
      s.cache.reset();
      if (s.request.session_id.empty()) s.session_id.clear();
      break;
    }
    (void)s.cache->reserve(target);
    s.chunk = chunk;
    budget -= chunk;
    if (!s.admitted_once) {
      s.admitted_once = true;
      s.admitted = Clock::now();
    }
    auto moved = std::move(*it);
    waiting_.erase(it);
    running_.push_back(std::move(moved));
  }
  std::stable_sort(running_.begin(), running_.end(),
                   [](const auto& a, const auto& b) { return ranks_before(*a, *b); });

  // The step: every planned chunk in one batched forward pass.
  const auto vocab = static_cast<size_t>(model_.config().vocab);
  steps_.clear();
  std::vector<Sequence*> stepped;
  for (auto& s : running_)
    if (s->chunk > 0) stepped.push_back(s.get());
  if (stepped.empty()) {
    // Nothing runs and nothing could be admitted into an empty pool: the head request can
    // never run (validate() rules this out; kept so that no request can hang the loop).
    if (running_.empty() && !waiting_.empty()) {
      auto s = std::move(waiting_.front());
      waiting_.pop_front();
      finish(std::move(s), FinishReason::Error, "the request cannot be scheduled: KV memory too small");
    }
    return 0;
  }
  try {
    if (logits_.size() < stepped.size() * vocab) logits_.resize(stepped.size() * vocab);
  } catch (const std::bad_alloc&) {
    logits_.clear();
  }
  int64_t ran = 0;
  for (size_t i = 0; i < stepped.size(); ++i) {
    Sequence& s = *stepped[i];
    const int64_t pos0 = s.cache->n_positions();
    const bool ends_input = pos0 + s.chunk == static_cast<int64_t>(s.tokens.size());
    float* out = ends_input && !logits_.empty() ? logits_.data() + i * vocab : nullptr;
    prepare_capture(s, s.chunk);
    steps_.push_back(SequenceStep{s.cache.get(), s.tokens.data() + pos0, s.chunk, pos0, out, false,
                                  s.capture_rows > 0 ? s.capture.data() : nullptr, s.capture_from,
                                  s.capture_rows});
    ran += s.chunk;
  }
  Status st = logits_.empty() ? make_error("out of host memory for the step's logits")
                              : model_.forward_step(steps_, pool_threads_);
  ++counters_.steps;
  if (!st.ok()) {
    for (Sequence* p : stepped) {
      auto it = std::find_if(running_.begin(), running_.end(), [p](const auto& u) { return u.get() == p; });
      auto s = std::move(*it);
      running_.erase(it);
      finish(std::move(s), FinishReason::Error, st.error().message);
    }
    return ran;
  }
  for (size_t i = 0; i < stepped.size(); ++i) {
    Sequence& s = *stepped[i];
    if (s.chunk == 1 && s.first_token_done) ++counters_.decode_tokens;
    else counters_.prefill_tokens += s.chunk;
    const SequenceStep& done = steps_[i];
    s.chunk = 0;
    if (const int64_t point = next_compression_point(s); point >= 0 && s.cache->n_positions() == point)
      compress_sequence(s);
    if (done.logits == nullptr) continue;
    s.result.finish = FinishReason::Stop;
    if (!sample_next(s, done.logits)) continue;
    auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& u) { return u.get() == &s; });
    auto owned = std::move(*it);
    running_.erase(it);
    const FinishReason reason = owned->result.finish;
    finish(std::move(owned), reason);
  }
  return ran;
}

void Scheduler::run_until_idle() {
  while (!idle()) step();
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats st = counters_;
  st.running = static_cast<int>(running_.size());
  st.waiting = static_cast<int>(waiting_.size());
  st.sessions = sessions_.size();
  st.resident_sessions = sessions_.resident();
  st.session_evictions = sessions_.evictions();
  st.pool = pool_->stats();
  if (tiers_) st.tiers = tiers_->stats();
  return st;
}

}  // namespace tangram
