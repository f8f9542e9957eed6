// The scheduler's compression points: where a sequence is compressed, the queries its scorer
// reads (captured during the step, or from the kvzip reconstruction pass), the compression
// itself, and what admission knows of a sequence.
#include <algorithm>
#include <chrono>

#include "scheduler/scheduler.h"

namespace tangram {

namespace {

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

AdmissionView Scheduler::admission_view(const Sequence& s) const {
  const auto end = static_cast<int64_t>(s.tokens.size());
  const int64_t max_tokens = s.request.params.max_tokens;
  const int64_t max_new =
      max_tokens > 0 ? max_tokens - static_cast<int64_t>(s.result.tokens.size()) : context_ - end;
  return AdmissionView{s.cache.get(), end, s.compress_base, next_compression_point(s), max_new};
}

int64_t Scheduler::next_compression_point(const Sequence& s) const {
  const CompressionOptions& co = compressor_->options();
  if (!co.compresses() || !s.cache || !s.awaiting_sample || s.pooled) return -1;
  // First-turn-only: a conversation whose cache held tokens when this request began is past
  // its first turn (its first prefill started from an empty cache).
  if (co.first_turn_only && s.result.usage.cached_tokens > 0) return -1;
  const auto end = static_cast<int64_t>(s.tokens.size());
  return std::min(end, s.compress_base + co.chunk);
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
                         static_cast<size_t>(c.q_dim()),
                     0.0f);
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
  queries.assign(
      static_cast<size_t>(c.n_layers) * static_cast<size_t>(r) * static_cast<size_t>(c.q_dim()),
      0.0f);
  Status st = Status::Ok();
  for (int64_t done = 0; done < n && st.ok();) {
    const int64_t m = std::min(options_.step_tokens, n - done);
    const SequenceStep step{
        &cache, pass.data() + done, m, point + done, nullptr, false, queries.data(), pos0, r};
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

}  // namespace tangram
