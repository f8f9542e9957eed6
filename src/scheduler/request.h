// What a caller hands the scheduler (a Request) and what it gets back: streamed tokens
// (TokenEvent) and one final RequestResult with usage and timing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/pooling.h"
#include "runtime/finish_reason.h"
#include "runtime/logprobs.h"
#include "runtime/sampling_params.h"
#include "runtime/token_constraint.h"

namespace tangram {

using RequestId = uint64_t;

// Most choices (Request::n) one request may ask for.
inline constexpr int kMaxChoices = 16;

// One generated token and the text it completed (possibly empty: a partial UTF-8 character,
// or text held back while it might still become a stop string).
struct TokenEvent {
  RequestId id = 0;
  int choice = 0;  // which of the request's n choices (0 with n = 1)
  int32_t token = 0;
  std::string_view text;
  const TokenLogprob* logprob = nullptr;  // with Request::top_logprobs >= 0; valid during the call
};

struct RequestUsage {
  int64_t prompt_tokens = 0;      // tokens of the prompt
  int64_t cached_tokens = 0;      // prompt tokens found in a resident session cache (not run)
  int64_t completion_tokens = 0;  // tokens generated
  int64_t recomputed_tokens = 0;  // tokens run again after a preemption freed their KV
  // Of cached_tokens, those whose KV was brought back from a tier (host, disk, Redis) for this
  // request rather than found resident in the pool.
  int64_t restored_tokens = 0;
  // Of cached_tokens, those whose KV was kept at new positions: the session held them after a
  // range this prompt leaves out (Request::context_shift).
  int64_t repositioned_tokens = 0;
  int preemptions = 0;
};

// What KV compression did to this request's cache (all compression points of the request).
struct RequestCompression {
  int compressions = 0;
  int64_t entries_before = 0;  // (layer, KV head) entries just before the last compression
  int64_t entries_after = 0;   // ... and just after it
  int64_t pages_freed = 0;     // over all compressions
  double seconds = 0;          // scoring, selection, compaction, release
};

struct RequestTiming {
  double queue_seconds = 0;    // submitted -> first admitted
  double prefill_seconds = 0;  // admitted -> first token sampled (includes waiting in steps)
  double decode_seconds = 0;   // first token -> finished
  double total_seconds = 0;    // submitted -> finished
};

struct RequestResult {
  RequestId id = 0;
  int choice = 0;               // which of the request's n choices this result is
  std::string session_id;       // the session whose cache now holds this conversation ("" if none)
  std::vector<int32_t> tokens;  // [completion_tokens] generated ids (end-of-generation excluded)
  std::string text;             // generated text, stop string excluded
  FinishReason finish = FinishReason::Stop;
  int stop_index = -1;  // the stop string that ended it (index into params.stop); -1: none did
  std::string error;    // set when finish == Error
  RequestUsage usage;
  RequestTiming timing;
  RequestCompression compression;
  uint64_t seed = 0;                // the sampler's seed
  std::vector<float> first_logits;  // [vocab] logits of the prompt's last token, if asked for
  std::vector<float> embedding;     // [n_embd] an embedding request's pooled, normalised vector
};

struct Request {
  std::vector<int32_t> prompt;  // the whole context: for a chat, every turn so far, rendered
  SamplingParams params;
  // Conversation key. Its resident KV is reused for the prompt's common prefix, and the
  // turn's KV stays resident under it afterwards. Empty: the request may still continue a
  // resident session whose tokens its prompt extends (see Scheduler), else it starts a new one.
  std::string session_id;
  int priority = 0;  // higher is admitted first and preempted last
  // Choices to generate for the one prompt, in [1, kMaxChoices]. The prompt is prefilled once;
  // when its last token has run, the sequence forks into n that share the prompt's KV pages
  // (PagedKvCache::fork) and decode as sequences of the same batches. Choice i samples with
  // seed params.seed + i (with no seed: a random seed + i, reported in each result). The
  // session continues with choice 0; the other choices run as sessionless requests (their KV
  // may stay resident as anonymous sessions that a next prompt extending them continues).
  int n = 1;
  // Whether choices 1..n-1 keep their KV resident as anonymous sessions when they end (a next
  // prompt extending one continues it). false: their pages go back to the pool at once (the
  // server: such sessions belong to no API key, so nothing may hold pages for them).
  bool keep_other_choices = true;
  bool keep_first_logits = false;  // fill RequestResult::first_logits (tests)
  // The prompt may continue its session with a range of the session's tokens left out (the server
  // dropped the oldest turns to stay within the context): the KV after the range is then kept,
  // moved down and its keys re-rotated (scheduler/context_shift.h), instead of recomputed. Off
  // by default: a prompt that removes text a user edited out should be recomputed.
  bool context_shift = false;
  // Mean, Cls or Last: an embedding request. Its prompt runs through the model in a fresh cache
  // (never a session's: every row must be computed), nothing is generated, and it finishes
  // with RequestResult::embedding, the final-normed hidden states pooled this way and scaled
  // to unit length. Its pages go back to the pool at once. None: a generation request.
  Pooling embed = Pooling::None;
  // >= 0: every generated token's TokenEvent carries its log-probability and this many most
  // likely alternatives (at most kMaxTopLogprobs).
  int top_logprobs = -1;
  // What the output must look like (a JSON schema, a tool-call syntax), in its initial state;
  // null: unconstrained. The scheduler works on its own copy per sequence. A constrained
  // sequence ends with finish Stop as soon as the constraint says the output is complete, and
  // with Error if no token of the vocabulary can continue it.
  std::shared_ptr<const TokenConstraint> constraint;
  // Called on the scheduler's thread; keep them short. on_finish is called exactly n times (once
  // per choice, RequestResult::choice telling which) for every request that submit() accepted;
  // a request that ends before its choices fork (cancelled, failed) reports every choice with
  // the same finish.
  std::function<void(const TokenEvent&)> on_token;
  std::function<void(const RequestResult&)> on_finish;
};

}  // namespace tangram
