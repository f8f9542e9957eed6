#include "server/server_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace tangram::server {
namespace {

using prometheus::Histogram;

// Latency buckets from 5 ms to 2 minutes: CPU serving spans both ends.
Histogram::BucketBoundaries latency_buckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120};
}
Histogram::BucketBoundaries token_buckets() {
  return {1, 8, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768};
}

prometheus::Counter& counter(prometheus::Registry& r, const std::string& name,
                             const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
}
prometheus::Gauge& gauge(prometheus::Registry& r, const std::string& name,
                         const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}
Histogram& histogram(prometheus::Registry& r, const std::string& name, const std::string& help,
                     const Histogram::BucketBoundaries& b) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add({}, b);
}

// Engine counters are cumulative in SchedulerStats; Prometheus counters only go up by deltas.
void advance(prometheus::Counter* c, int64_t now, int64_t before) {
  if (now > before) c->Increment(static_cast<double>(now - before));
}

}  // namespace

ServerMetrics::ServerMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  requests_ = &prometheus::BuildCounter()
                   .Name("tangram_http_requests_total")
                   .Help("HTTP responses by endpoint and status code")
                   .Register(r);
  prompt_tokens_ = &counter(r, "tangram_prompt_tokens_total", "Prompt tokens of finished requests");
  cached_tokens_ =
      &counter(r, "tangram_prompt_tokens_cached_total",
               "Prompt tokens whose KV was reused from a resident session (not recomputed)");
  generation_tokens_ = &counter(r, "tangram_generation_tokens_total", "Tokens generated");
  queue_full_ = &counter(r, "tangram_requests_rejected_queue_full_total",
                         "Requests answered 429 (queue full)");
  disconnects_ = &counter(r, "tangram_client_disconnects_total",
                          "Streams cancelled because the client went away");
  ttft_ = &histogram(r, "tangram_time_to_first_token_seconds", "Request received to first token",
                     latency_buckets());
  tpot_ = &histogram(r, "tangram_time_per_output_token_seconds",
                     "Mean time between output tokens of a request",
                     {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5});
  e2e_ = &histogram(r, "tangram_request_duration_seconds", "Request received to last token",
                    latency_buckets());
  queue_ = &histogram(r, "tangram_request_queue_seconds",
                      "Submitted to first admitted by the scheduler", latency_buckets());
  prompt_len_ = &histogram(r, "tangram_request_prompt_tokens", "Prompt length of finished requests",
                           token_buckets());
  completion_len_ = &histogram(r, "tangram_request_generation_tokens",
                               "Tokens generated per request", token_buckets());
  running_ = &gauge(r, "tangram_requests_running",
                    "Requests admitted by the scheduler (prefilling or decoding)");
  waiting_ = &gauge(r, "tangram_requests_waiting", "Requests queued in the scheduler");
  inflight_ = &gauge(r, "tangram_http_requests_inflight",
                     "Generation requests accepted by the server and not finished");
  sessions_ = &gauge(r, "tangram_sessions", "Conversations known to the scheduler");
  sessions_resident_ = &gauge(r, "tangram_sessions_resident", "Conversations whose KV is resident");
  pages_total_ = &gauge(r, "tangram_kv_pages_total", "KV pool pages");
  pages_used_ = &gauge(r, "tangram_kv_pages_used", "KV pool pages in use");
  pages_free_ = &gauge(r, "tangram_kv_pages_free", "KV pool pages free");
  slots_used_ =
      &gauge(r, "tangram_kv_slots_used", "KV slots (one token of one KV head) holding an entry");
  slots_wasted_ = &gauge(r, "tangram_kv_slots_wasted",
                         "KV slots allocated but empty (partial pages, short heads)");
  slots_free_ = &gauge(r, "tangram_kv_slots_free", "KV slots in free pages");
  kv_bytes_used_ = &gauge(r, "tangram_kv_used_bytes", "Bytes of KV pool pages in use");
  preemptions_ =
      &counter(r, "tangram_preemptions_total", "Requests preempted (KV freed, recomputed later)");
  evictions_ =
      &counter(r, "tangram_session_evictions_total", "Idle session caches evicted for memory");
  compressions_ = &counter(r, "tangram_kv_compressions_total", "KV compression passes");
  pages_freed_ =
      &counter(r, "tangram_kv_compression_pages_freed_total", "KV pages returned by compression");
  prefill_tokens_ = &counter(r, "tangram_prefill_tokens_total", "Prompt and recomputed tokens run");
  decode_tokens_ = &counter(r, "tangram_decode_tokens_total", "Decode tokens run");
  auto& tier_sessions = prometheus::BuildGauge()
                            .Name("tangram_kv_tier_sessions")
                            .Help("Idle sessions whose KV is held by a tier below the pool")
                            .Register(r);
  tier_sessions_host_ = &tier_sessions.Add({{"tier", "host"}});
  tier_sessions_disk_ = &tier_sessions.Add({{"tier", "disk"}});
  auto& tier_bytes = prometheus::BuildGauge()
                         .Name("tangram_kv_tier_bytes")
                         .Help("Bytes of session KV held by each tier")
                         .Register(r);
  tier_bytes_host_ = &tier_bytes.Add({{"tier", "host"}});
  tier_bytes_disk_ = &tier_bytes.Add({{"tier", "disk"}});
  offloads_ =
      &counter(r, "tangram_kv_offloads_total", "Sessions' KV moved out of the pool into a tier");
  auto& restores =
      prometheus::BuildCounter()
          .Name("tangram_kv_restores_total")
          .Help("Sessions' KV restored from a tier instead of recomputed, by the tier it came from")
          .Register(r);
  restores_host_ = &restores.Add({{"tier", "host"}});
  restores_disk_ = &restores.Add({{"tier", "disk"}});
  restores_redis_ = &restores.Add({{"tier", "redis"}});
  recomputes_ = &counter(
      r, "tangram_kv_recomputes_total",
      "Sessions whose KV had left the pool and was in no tier: their next turn recomputed it");
  redis_up_ = &gauge(r, "tangram_kv_redis_up",
                     "1 while the shared Redis tier is connected (0 when down or not used)");
  redis_writes_ =
      &counter(r, "tangram_kv_redis_writes_total", "Sessions written to the shared Redis tier");
  redis_bytes_written_ =
      &counter(r, "tangram_kv_redis_written_bytes_total", "Bytes written to the shared Redis tier");
  redis_hits_ =
      &counter(r, "tangram_kv_redis_hits_total", "Session lookups found in the shared Redis tier");
  redis_errors_ = &counter(
      r, "tangram_kv_redis_errors_total",
      "Shared Redis tier calls that failed (down, timeout, refused): local tiers served instead");
  restore_failures_ =
      &counter(r, "tangram_kv_restore_failures_total",
               "Tier blobs refused on restore (other model or policy, damaged): recomputed");
  offload_seconds_ =
      &counter(r, "tangram_kv_offload_seconds_total", "Time spent encoding and storing session KV");
  restore_seconds_ = &counter(r, "tangram_kv_restore_seconds_total",
                              "Time spent fetching and decoding session KV");
}

ServerMetrics::~ServerMetrics() = default;

void ServerMetrics::count_response(const std::string& endpoint, int status) {
  std::lock_guard lock(mu_);
  requests_->Add({{"endpoint", endpoint}, {"status", std::to_string(status)}}).Increment();
}

void ServerMetrics::observe(const RequestObservation& o) {
  prompt_tokens_->Increment(static_cast<double>(o.prompt_tokens));
  cached_tokens_->Increment(static_cast<double>(o.cached_tokens));
  generation_tokens_->Increment(static_cast<double>(o.completion_tokens));
  prompt_len_->Observe(static_cast<double>(o.prompt_tokens));
  completion_len_->Observe(static_cast<double>(o.completion_tokens));
  queue_->Observe(o.queue_s);
  e2e_->Observe(o.e2e_s);
  if (o.ttft_s >= 0) ttft_->Observe(o.ttft_s);
  if (o.tpot_s >= 0) tpot_->Observe(o.tpot_s);
}

void ServerMetrics::count_rejected_queue_full() { queue_full_->Increment(); }
void ServerMetrics::count_client_disconnect() { disconnects_->Increment(); }

std::string ServerMetrics::scrape(const SchedulerStats& s, int64_t http_inflight) {
  {
    std::lock_guard lock(mu_);
    running_->Set(s.running);
    waiting_->Set(s.waiting);
    inflight_->Set(static_cast<double>(http_inflight));
    sessions_->Set(static_cast<double>(s.sessions));
    sessions_resident_->Set(static_cast<double>(s.resident_sessions));
    pages_total_->Set(static_cast<double>(s.pool.total_pages));
    pages_used_->Set(static_cast<double>(s.pool.used_pages));
    pages_free_->Set(static_cast<double>(s.pool.free_pages));
    slots_used_->Set(static_cast<double>(s.pool.used_slots));
    slots_wasted_->Set(static_cast<double>(s.pool.wasted_slots));
    slots_free_->Set(static_cast<double>(s.pool.free_pages * s.pool.slots_per_page));
    kv_bytes_used_->Set(static_cast<double>(s.pool.used_pages) *
                        static_cast<double>(s.pool.page_bytes));
    advance(preemptions_, s.preemptions, last_.preemptions);
    advance(evictions_, s.session_evictions, last_.session_evictions);
    advance(compressions_, s.compressions, last_.compressions);
    advance(pages_freed_, s.pages_freed, last_.pages_freed);
    advance(prefill_tokens_, s.prefill_tokens, last_.prefill_tokens);
    advance(decode_tokens_, s.decode_tokens, last_.decode_tokens);
    tier_sessions_host_->Set(static_cast<double>(s.tiers.host_sessions));
    tier_sessions_disk_->Set(static_cast<double>(s.tiers.disk_sessions));
    tier_bytes_host_->Set(static_cast<double>(s.tiers.host_bytes));
    tier_bytes_disk_->Set(static_cast<double>(s.tiers.disk_bytes));
    advance(offloads_, s.tiers.offloads, last_.tiers.offloads);
    advance(restores_host_, s.tiers.restores_host, last_.tiers.restores_host);
    advance(restores_disk_, s.tiers.restores_disk, last_.tiers.restores_disk);
    advance(restores_redis_, s.tiers.restores_redis, last_.tiers.restores_redis);
    advance(recomputes_, s.tiers.recomputes, last_.tiers.recomputes);
    redis_up_->Set(s.tiers.redis.connected ? 1 : 0);
    advance(redis_writes_, s.tiers.redis.puts, last_.tiers.redis.puts);
    advance(redis_bytes_written_, s.tiers.redis.bytes_put, last_.tiers.redis.bytes_put);
    advance(redis_hits_, s.tiers.redis.hits, last_.tiers.redis.hits);
    advance(redis_errors_, s.tiers.redis.errors, last_.tiers.redis.errors);
    advance(restore_failures_, s.tiers.restore_failures, last_.tiers.restore_failures);
    if (s.tiers.offload_seconds > last_.tiers.offload_seconds)
      offload_seconds_->Increment(s.tiers.offload_seconds - last_.tiers.offload_seconds);
    if (s.tiers.restore_seconds > last_.tiers.restore_seconds)
      restore_seconds_->Increment(s.tiers.restore_seconds - last_.tiers.restore_seconds);
    last_ = s;
  }
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace tangram::server
