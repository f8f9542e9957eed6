// The server's Prometheus metrics (text exposition format at GET /metrics), all prefixed
// `tangram_`, in base units (seconds, tokens, bytes). Request metrics are recorded by the
// handlers as requests finish; engine gauges are read from the scheduler's stats at each scrape.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "scheduler/scheduler.h"

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace tangram::server {

// What one finished generation request contributes.
struct RequestObservation {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t completion_tokens = 0;
  double queue_s = 0;
  double ttft_s = -1;  // < 0: no token was produced
  double tpot_s = -1;  // < 0: fewer than two tokens
  double e2e_s = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();
  ~ServerMetrics();
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  // Every HTTP response: endpoint is the route ("/v1/chat/completions", or "other").
  void count_response(const std::string& endpoint, int status);
  void observe(const RequestObservation& o);
  void count_rejected_queue_full();
  void count_client_disconnect();

  // The exposition text, with engine gauges and counters brought up to date from `stats`.
  std::string scrape(const SchedulerStats& stats, int64_t http_inflight);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::mutex mu_;  // guards the status counters map and the engine counter bases
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Counter* prompt_tokens_;
  prometheus::Counter* cached_tokens_;
  prometheus::Counter* generation_tokens_;
  prometheus::Counter* queue_full_;
  prometheus::Counter* disconnects_;
  prometheus::Histogram* ttft_;
  prometheus::Histogram* tpot_;
  prometheus::Histogram* e2e_;
  prometheus::Histogram* queue_;
  prometheus::Histogram* prompt_len_;
  prometheus::Histogram* completion_len_;
  // Engine state, at scrape time.
  prometheus::Gauge* running_;
  prometheus::Gauge* waiting_;
  prometheus::Gauge* inflight_;
  prometheus::Gauge* sessions_;
  prometheus::Gauge* sessions_resident_;
  prometheus::Gauge* pages_total_;
  prometheus::Gauge* pages_used_;
  prometheus::Gauge* pages_free_;
  prometheus::Gauge* slots_used_;
  prometheus::Gauge* slots_wasted_;
  prometheus::Gauge* slots_free_;
  prometheus::Gauge* kv_bytes_used_;
  prometheus::Counter* preemptions_;
  prometheus::Counter* evictions_;
  prometheus::Counter* compressions_;
  prometheus::Counter* pages_freed_;
  prometheus::Counter* prefill_tokens_;
  prometheus::Gauge* tier_sessions_host_;
  prometheus::Gauge* tier_sessions_disk_;
  prometheus::Gauge* tier_bytes_host_;
  prometheus::Gauge* tier_bytes_disk_;
  prometheus::Counter* offloads_;
  prometheus::Counter* restores_host_;
  prometheus::Counter* restores_disk_;
  prometheus::Counter* restores_redis_;
  prometheus::Counter* recomputes_;
  prometheus::Gauge* redis_up_;
  prometheus::Counter* redis_writes_;
  prometheus::Counter* redis_bytes_written_;
  prometheus::Counter* redis_hits_;
  prometheus::Counter* redis_errors_;
  prometheus::Counter* restore_failures_;
  prometheus::Counter* offload_seconds_;
  prometheus::Counter* restore_seconds_;
  prometheus::Counter* decode_tokens_;
  SchedulerStats last_;  // the counters' values at the previous scrape
};

}  // namespace tangram::server
