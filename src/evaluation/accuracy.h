// What a KV policy costs in accuracy: its next-token distributions and greedy output compared
// with the full, uncompressed cache on the same model and the same text.
//
// policy_agreement() prefills a fixed context twice: into a contiguous F32 cache (the
// reference, nothing evicted) and into a paged F32 cache that the policy's Compressor then
// compresses once, exactly as the scheduler compresses a turn's prefill (observation-window
// queries captured during the prefill; a "repeat the context" pass for the KVzip-style
// scorer). Two measurements follow, each starting from that state:
//  - greedy: both caches generate n_generate tokens by argmax, each from its own logits, until
//    the first position where they differ. The first generated token comes from the prefill's
//    logits, which compression cannot change (compression happens after the prefill), so it
//    only differs by floating-point noise; that is the serving path, measured as it is.
//  - teacher-forced: both caches read the same `continuation` tokens; after each one the KL
//    divergence KL(p_full || p_policy) of the two next-token distributions is taken, in nats.
// Between the two, both caches are cut back to the context (truncate), which restores the
// compressed state exactly: every kept entry lies inside the context.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/thread_pool.h"
#include "compress/kv_policy.h"
#include "kv/paged_kv_cache.h"
#include "model/model.h"

namespace tangram {

struct AgreementResult {
  // Greedy tokens equal to full's until the first divergence, over n_generate (1 when
  // n_generate is 0).
  double token_match_rate = 1.0;
  int64_t first_divergence = -1;  // index of the first differing generated token; -1 if none
  // Over the continuation positions (teacher-forced): KL(p_full || p_policy) in nats.
  double mean_kl = 0.0;
  double max_kl = 0.0;
  // KV entries over all (layer, KV head) after / before compression.
  int64_t kept_entries = 0;
  int64_t total_entries = 0;
};

// Runs the comparison described above. group_size: KV heads per page for the tangram policy
// (0 or ignored for the others); page_tokens: page size of the policy's pool.
// Errors (never aborts): empty context or continuation, n_generate < 0, page_tokens < 1,
// context plus continuation (or generation, or the KVzip pass) longer than the model's
// context, a token id outside the vocabulary, invalid policy options or profile, non-finite
// logits.
Result<AgreementResult> policy_agreement(Model& model, const CompressionOptions& policy,
                                         int group_size, int page_tokens,
                                         std::span<const int32_t> context,
                                         std::span<const int32_t> continuation, int n_generate,
                                         ThreadPool& pool);

// --- Building blocks of the policy side, shared with perplexity.h ---

// Runs tokens at positions pos0 .. pos0 + size - 1 in steps of at most max_step tokens (0 or
// above the model's max batch: max_batch). Query rows at positions capture_from ..
// capture_from + capture_rows - 1 are copied to capture_q ([n_layers][capture_rows][n_head]
// [head_dim]) when it is not null. logits (may be null): with all_logits every token's row,
// [size][vocab]; otherwise the last token's, [vocab].
Status run_capturing(Model& model, KvCache& cache, std::span<const int32_t> tokens, int64_t pos0,
                     float* logits, float* capture_q, int64_t capture_from, int64_t capture_rows,
                     ThreadPool& pool, bool all_logits = false, int64_t max_step = 0);

// The queries the policy's scorer reads, gathered on the freshly prefilled paged cache:
// nothing for query-free scorers, the observation window (captured during the prefill) or a
// reconstruction pass, which leaves the cache as it found it.
struct ScorerQueries {
  std::vector<float> rows;  // [n_layers][n_rows][n_head][head_dim]
  int64_t n_rows = 0;
  int64_t pos0 = 0;
};

// The KVzip-style pass: `instruction` then the context's last n_rows tokens run after the
// context (which the cache holds, context.size() positions); their queries go to q and the
// cache is cut back to the context.
Status reconstruction_pass(Model& model, PagedKvCache& cache, std::span<const int32_t> context,
                           std::span<const int32_t> instruction, int64_t n_rows, ScorerQueries& q,
                           ThreadPool& pool);

// The instruction the KVzip-style pass repeats the context after (the scheduler's text).
inline constexpr std::string_view kRepeatInstruction = "\n\nRepeat the previous context exactly.\n";

// --- Numerics, exposed for tests and for other reports ---

// out[i] = logits[i] - log(sum_j exp(logits[j])), in double, shifted by the maximum so large
// logits neither overflow nor lose precision. out.size() must equal logits.size().
// A -inf logit gives -inf; the result is meaningless if any logit is NaN or +inf (callers
// check with all_finite).
void log_softmax(std::span<const float> logits, std::span<double> out);

// KL(softmax(p_logits) || softmax(q_logits)) in nats, computed from log-softmaxes:
// sum_i p_i (log p_i - log q_i), where terms with p_i = 0 contribute 0 and a term with
// p_i > 0 but q_i = 0 makes the result +inf. Rounding can give a tiny negative sum; it is
// clamped at 0. NaN when the spans are empty or differ in size.
double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits);

// Index of the largest logit (the first one on ties); 0 for an empty span.
int32_t argmax(std::span<const float> logits);

// True when no value is NaN or infinite.
bool all_finite(std::span<const float> values);

}  // namespace tangram
