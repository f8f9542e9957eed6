// Continuous batching over the paged KV pool: many requests share every step.
//
// A step (step()) plans, then runs in one Model::forward_step():
//   1. plan_decode: one decode token for every running sequence that is decoding;
//   2. plan_prefill: prefill chunks (at most prefill_chunk tokens each) of sequences still
//      reading their prompt, while the step's token budget (step_tokens) lasts, so a long
//      prompt never stalls the others' decoding for more than one chunk;
//   3. admit_waiting: newly admitted requests' first chunks, if budget and memory remain (how
//      much memory a request needs is its policy's AdmissionRule, compress/admission.h);
//   4. run_planned: the forward pass;
//   5. finish_step: sequences at a compression point are compressed; each sequence whose chunk
//      ended its input samples a token, streams it, and finishes on an end-of-generation
//      token, a stop string, max_tokens or a full context.
//
// Memory. Every sequence has a PagedKvCache in the one BlockPool. Before a step each chunk's
// pages are reserved; when the pool is short, idle session caches are evicted least recently
// used first, then the lowest-priority (then newest) running sequence is preempted: its pages
// go back and it returns to the queue to be recomputed from its tokens (prompt and what it had
// generated), continuing exactly where it stopped. A request is admitted only if its first
// chunk fits without preempting anyone. A prompt that could never fit in the whole pool is
// refused at submit.
//
// Sessions (kept by a SessionKeeper, store/session_keeper.h): a finished request's cache stays
// resident under its session id; the next request of that session reuses the longest common
// prefix of its prompt and prefills only the rest. Requests without an id continue the
// best-matching idle session.
//
// Threading: a Scheduler is driven by one thread (Engine wraps it in a worker thread with a
// thread-safe inbox). Callbacks run on that thread, inside step().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/thread_pool.h"
#include "compress/admission.h"
#include "compress/compressor.h"
#include "compress/kv_policy.h"
#include "kv/block_pool.h"
#include "kv/head_group_map.h"
#include "kv/paged_kv_cache.h"
#include "model/model.h"
#include "runtime/sampler.h"
#include "runtime/stop_strings.h"
#include "scheduler/request.h"
#include "store/session_keeper.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace tangram {

struct SchedulerOptions {
  size_t kv_memory = size_t{1} << 30;  // bytes of the KV page arena (--kv-memory)
  int page_tokens = 16;                // P: token slots per page (--page-tokens)
  int page_group_size = -1;            // G: KV heads per page; 0 = all of a layer's (unified);
                                       // -1 = the policy's layout (tangram 4, others unified)
  KvType kv_type = KvType::F16;
  int64_t prefill_chunk = 512;     // most prompt tokens of one sequence per step
  int64_t step_tokens = 512;       // token budget of one step (<= the model's max batch)
  int max_running = 64;            // sequences running at once
  int64_t max_context = 0;         // positions per sequence; 0 = the model's context
  bool keep_sessions = true;       // keep finished requests' KV resident for the next turn
  bool prefault = true;            // touch the arena up front (no page faults later)
  CompressionOptions compression;  // KV policy, scorer, ratio, budgets (default: full KV)
  // How attention work is split across threads; empty: the policy's (tangram ahead of time,
  // the others planned every step).
  std::optional<AttentionSplit> attention_split;
};

struct SchedulerStats {
  int running = 0;
  int waiting = 0;
  size_t sessions = 0;
  size_t resident_sessions = 0;
  int64_t steps = 0;
  int64_t prefill_tokens = 0;  // prompt (and recomputed) tokens run
  int64_t decode_tokens = 0;   // decode tokens run
  int64_t preemptions = 0;
  int64_t context_shifts = 0;  // sessions whose KV was moved past a removed range (context_shift.h)
  int64_t session_evictions = 0;
  int64_t finished = 0;
  // Compression.
  int64_t compressions = 0;
  int64_t compression_skipped = 0;  // reconstruction pass found no room
  int64_t entries_dropped = 0;      // (layer, head) entries removed over all compressions
  int64_t pages_freed = 0;          // pages returned by compression
  double compress_seconds = 0;      // scoring + selection + compaction + release
  double reclaim_seconds = 0;       // selection + compaction + release (run-time reclamation)
  int64_t heads_compressed = 0;
  int64_t heads_pressured = 0;  // tangram: run-time share above the head's budget
  PoolStats pool;
  SessionTierStats tiers;
};

class Scheduler {
 public:
  // Errors: invalid page geometry or group size, an arena too small for one page per group of
  // every layer, prefill_chunk or step_tokens < 1, step_tokens above the model's max batch.
  // `sessions` configures where idle sessions' KV goes (tiers; see SessionKeeperOptions).
  static Result<std::unique_ptr<Scheduler>> create(Model& model, const Tokenizer& tokenizer,
                                                   ThreadPool& pool,
                                                   const SchedulerOptions& options,
                                                   const SessionKeeperOptions& sessions = {});
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Checks a request without queuing it: empty prompt, ids out of range, a prompt that leaves
  // no room to generate in the context, one whose KV could never fit the pool, invalid
  // sampling parameters. Thread-safe (reads only immutable state).
  Status validate(const Request& request) const;
  // Validates and queues; returns the request's id.
  Result<RequestId> submit(Request request);
  // Queues with a caller-chosen id (unique; Engine assigns them); validates first.
  Status submit_with_id(RequestId id, Request request);
  // Cancels a queued or running request: it finishes with FinishReason::Cancelled (its KV so far
  // stays with its session) during this call. False if no such request is pending.
  bool cancel(RequestId id);
  // Cancels every queued and running request.
  void cancel_all();

  // Runs one step. Returns the number of tokens run (0: nothing to do). An error of the
  // forward pass finishes the step's requests with FinishReason::Error; the scheduler
  // remains usable.
  int64_t step();
  bool idle() const { return running_.empty() && waiting_.empty(); }
  // Steps until every request has finished.
  void run_until_idle();

  // Forgets a session everywhere, for good: its pending requests with ids below `cancel_before`
  // are cancelled first (they finish with FinishReason::Cancelled and their KV goes back to the
  // pool, not to the session, so nothing of it is written to a tier afterwards), then its cache,
  // its entry and its copies in every tier (host, disk, Redis; a queued write is cancelled) go.
  // Requests of the id submitted later (a new conversation under the same id) are left alone.
  // False if nothing of the session was known.
  bool drop_session(const std::string& id,
                    RequestId cancel_before = std::numeric_limits<RequestId>::max());
  // Where a session's KV is: "running" (a request of it is pending), "resident", "host", "disk",
  // "redis", or "none" (recomputed on its next turn, or unknown).
  std::string session_tier(const std::string& id) { return session_location(id).tier; }
  // The tier and the bytes of a session's KV there: pages held while resident or running, the
  // serialised size in a tier below.
  SessionTiers::Location session_location(const std::string& id);
  // The sessions between turns and their tiers (evict_idle, offload_idle, named_sessions,
  // flush_writes, wait_written, ...).
  SessionKeeper& sessions() { return *sessions_; }
  const SessionKeeper& sessions() const { return *sessions_; }

  SchedulerStats stats() const;
  const BlockPool& pool() const { return *pool_; }
  const SchedulerOptions& options() const { return options_; }
  const Compressor& compressor() const { return *compressor_; }
  const HeadGroupMap& group_map() const { return *map_; }
  int64_t context() const { return context_; }
  const Model& model() const { return model_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Sequence {
    RequestId id = 0;
    int choice = 0;       // of request.n; choices > 0 are forks of choice 0
    bool forked = false;  // choice 0 of n > 1: its further choices exist
    uint64_t arrival = 0;
    Request request;
    std::optional<Sampler> sampler;
    std::vector<float> raw_logits;  // with top_logprobs: the step's logits before sampling
    std::unique_ptr<TokenConstraint> constraint;  // this sequence's copy of request.constraint
    std::vector<float> unmasked;   // [n_vocab] with a constraint: the row before sampling
    std::vector<uint8_t> allowed;  // [n_vocab] with a constraint: its mask, when it was needed
    std::vector<int32_t> tokens;   // prompt, then generated tokens
    size_t n_prompt = 0;
    std::unique_ptr<PagedKvCache> cache;  // null while queued
    std::string session_id;               // session the KV returns to ("" = none)
    std::unique_ptr<StreamDecoder> decoder;
    std::unique_ptr<StopStringMatcher> stops;
    RequestResult result;
    int64_t chunk = 0;  // tokens scheduled in the current step
    // Compression: positions at the last compression point (or where this request's prefill
    // began), and the captured queries for the next point.
    int64_t compress_base = 0;
    bool awaiting_sample = true;  // admitted (again) and not yet sampled: still prefilling
    std::vector<float> capture;   // [n_layers][capture_rows][n_head][head_dim]
    int64_t capture_from = 0;
    int64_t capture_rows = 0;
    bool admitted_once = false;
    // Its session's KV was brought back from a tier while it waited to be admitted (kept when
    // an admission fails and the restored cache waits resident for the next try).
    bool restored_from_tier = false;
    bool first_token_done = false;
    bool session_dropped = false;           // its session was deleted: its KV must not return to it
    std::optional<PoolAccumulator> pooled;  // an embedding request's pooling so far
    std::vector<float> hidden;              // [chunk][n_embd] its hidden rows of this step
    Clock::time_point submitted, admitted, first_token;
  };

  Scheduler(Model& model, const Tokenizer& tokenizer, ThreadPool& pool,
            const SchedulerOptions& options);

  // Pages a sequence needs to hold n_total positions in a fresh cache.
  int64_t pages_for(int64_t n_total) const;
  // Frees pages until `pages` are free: idle sessions first, then running sequences ranked
  // below `keep` (from the lowest). False when that is not enough.
  bool make_room(int64_t pages, const Sequence* keep, bool may_preempt);
  void preempt(Sequence& s);
  // Gives a queued sequence its cache (a session's, trimmed to the common prefix, or new).
  Status attach_cache(Sequence& s);
  // A queued sequence of choice `choice` of a request (its own sampler, seeded for the choice).
  Result<std::unique_ptr<Sequence>> new_sequence(RequestId id, const Request& request, int choice,
                                                 std::optional<uint64_t> base_seed) const;
  // At the end of choice 0's prefill (logits: its last row, [vocab], not yet sampled): makes
  // choices 1..n-1, each a fork of its cache, samples their first tokens and runs them.
  void fork_choices(Sequence& s, const float* logits);
  // Reports choice `choice` of `request` as ended like `like` with nothing generated (it never
  // forked), so that a caller waiting for every choice hears of each.
  static void report_unforked_choice(const Request& request, const RequestResult& like, int choice);
  // Samples after a chunk that ended the sequence's input; true when it finished.
  bool sample_next(Sequence& s, float* logits);
  // Samples one token, keeping to the sequence's constraint if it has one: the draw is checked
  // and, when refused, made again from the row with every refused token masked. -1: nothing
  // was drawn (no vocabulary); -2: the constraint allows no token.
  int32_t sample_token(Sequence& s, float* logits, int n_vocab);
  void emit(Sequence& s, const std::string& text);
  // Ends a sequence: its cache returns to its session (or the pool), on_finish is called.
  void finish(std::unique_ptr<Sequence> s, FinishReason reason, std::string error = {});
  void insert_waiting(std::unique_ptr<Sequence> s);
  // Compression points: the next position at which s is compressed (its input's end, or
  // compression.chunk tokens after the last point); -1 when s is not compressed now.
  int64_t next_compression_point(const Sequence& s) const;
  // What the admission rule knows of s (which holds a cache).
  AdmissionView admission_view(const Sequence& s) const;
  // Sets s's query capture for the step (a range that may span steps).
  void prepare_capture(Sequence& s, int64_t chunk);
  // Compresses s's cache at a compression point; records the report.
  void compress_sequence(Sequence& s);
  // Runs the context-reconstruction pass (kvzip scorer) and returns its queries.
  Status reconstruction_queries(Sequence& s, std::vector<float>& queries, int64_t& n_rows,
                                int64_t& pos0);
  static bool ranks_before(const Sequence& a, const Sequence& b);

  // The step's phases (see the top of this file). The planners spend `budget` (tokens).
  void plan_decode(int64_t& budget);
  void plan_prefill(int64_t& budget);
  void admit_waiting(int64_t& budget);
  // Plans running_[i] for `chunk` more tokens; preempts lower-ranked sequences when short of
  // pages. Returns false when running_[i] itself had to leave running_.
  bool plan_chunk(size_t i, int64_t chunk, int64_t& budget);
  // The next prompt chunk of s: within the budget and prefill_chunk, stopping at its next
  // compression point.
  int64_t prefill_chunk(const Sequence& s, int64_t budget) const;
  // Reserves the pages its admission rule asks for s (given its cache) and plans its first
  // chunk; false (its cache handed back, it keeps its place) when they cannot be freed without
  // preempting.
  bool admit(Sequence& s, int64_t& budget);
  // Finishes the head request with an error when nothing runs and it cannot be admitted into
  // an empty pool.
  void fail_unschedulable();
  // Runs the planned chunks of `stepped` in one forward pass; adds the tokens run to `ran`.
  Status run_planned(const std::vector<Sequence*>& stepped, int64_t& ran);
  // After the forward pass (`st` its outcome): compression points, sampling, finished requests.
  void finish_step(const std::vector<Sequence*>& stepped, const Status& st);

  Model& model_;
  const Tokenizer& tokenizer_;
  ThreadPool& pool_threads_;
  SchedulerOptions options_;
  int64_t context_ = 0;
  std::unique_ptr<BlockPool> pool_;
  std::shared_ptr<const HeadGroupMap> map_;
  std::unique_ptr<Compressor> compressor_;
  std::unique_ptr<AdmissionRule> admission_;  // the policy's, over compressor_
  std::vector<int32_t> repeat_prompt_;  // "repeat the context" tokens of the reconstruction pass
  std::unique_ptr<SessionKeeper> sessions_;
  std::vector<int32_t> eos_ids_;

  std::deque<std::unique_ptr<Sequence>> waiting_;   // in rank order
  std::vector<std::unique_ptr<Sequence>> running_;  // in rank order
  uint64_t next_arrival_ = 0;
  RequestId next_id_ = 1;

  // Step buffers.
  std::vector<SequenceStep> steps_;
  std::vector<float> logits_;  // [sequences][vocab]

  SchedulerStats counters_;
};

}  // namespace tangram
