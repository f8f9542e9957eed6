// Perplexity of a text under a KV policy, teacher-forced the way serving sees a conversation.
//
// The tokens are cut into consecutive, non-overlapping windows of `window` tokens (the
// context; llama.cpp's llama-perplexity convention: every window starts from an empty cache
// with BOS as its first token, and a remainder shorter than a window is not evaluated). Inside a
// window the tokens arrive in turns of `chunk` tokens, each appended to the sequence's paged
// cache; the logits of every position are scored against the next token, and then the cache is
// compressed exactly where and how the scheduler compresses a turn (after the turn, and every
// CompressionOptions::chunk tokens inside a long one; observation queries captured during the
// turn, the reconstruction pass for KVzip), through the same Compressor entry point. Unlike
// llama-perplexity, every position of a window is scored, not only its second half: a turn's
// tokens must see the compressed earlier turns, which the first half holds.
//
// With a compressing policy a full-KV sequence (same pages, same KV type) reads the same turns
// in lockstep, giving KL(p_full || p_policy) at every scored position and the bytes of KV the
// policy holds per cached token relative to full KV.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>

#include "common/result.h"
#include "common/thread_pool.h"
#include "compress/kv_policy.h"
#include "kv/kv_cache.h"
#include "model/model.h"

namespace tangram {

struct PerplexityOptions {
  CompressionOptions policy;  // full on reference_kv_type: no reference run, no KL
  int group_size = -1;        // KV heads per page; -1: the policy's (tangram 4, others unified)
  int page_tokens = 16;
  KvType kv_type = KvType::F16;
  // Page type of the full-KV reference (none: kv_type). A policy track on another type (e.g.
  // q8_0 against f16) is compared with full KV on this one, so quantisation's cost shows even
  // without compression.
  std::optional<KvType> reference_kv_type;
  int64_t chunk = 128;   // tokens per turn
  int64_t window = 0;    // tokens per window; 0: the model's context
  int64_t max_step = 0;  // most tokens per forward step; 0: the model's max batch
  int32_t bos = -1;      // put at the start of every window after the first; -1: none
  // The KVzip-style pass's instruction tokens (needed only by a reconstruction scorer).
  std::span<const int32_t> repeat_instruction;
};

// The reference a run on `type` is measured against: quantized pages against F16 (the cost of
// quantising shows), float pages against themselves (the cost of the policy alone).
inline KvType reference_kv_type_for(KvType type) {
  return type == KvType::Q8_0 ? KvType::F16 : type;
}

// After each turn: where the run is and the perplexity so far.
struct PerplexityProgress {
  int64_t window = 0;  // 0-based
  int64_t n_windows = 0;
  int64_t turn = 0;       // 0-based, inside the window
  int64_t positions = 0;  // tokens of this window read so far
  int64_t scored = 0;     // predictions scored so far, over all windows
  double ppl = 0;         // running perplexity
  double mean_kl = 0;     // running mean KL (compressing policies)
};

struct PerplexityResult {
  int64_t n_tokens = 0;  // tokens of the text
  int64_t window = 0;    // tokens per window
  int64_t n_windows = 0;
  int64_t skipped_tokens = 0;  // the remainder after the last whole window
  int64_t scored = 0;          // predictions scored: n_windows * (window - 1)
  double mean_nll = 0;         // nats
  double nll_stderr = 0;       // standard error of the mean NLL
  double ppl = 0;              // exp(mean_nll)
  double ppl_stderr = 0;       // ppl * nll_stderr (first-order propagation)
  bool compared = false;       // a full-KV reference ran (compressing policy or other KV type)
  double mean_kl = 0;          // KL(p_full || p_policy), nats, over the scored positions
  double max_kl = 0;
  double top1_agreement = 1;  // share of scored positions where both argmax tokens agree
  // Mean over turns of (bytes of KV pages the policy holds) / (bytes full KV holds for the
  // same positions), measured after each turn's compression; 1 for full KV.
  double retention_bytes = 1;
  double retention_entries = 1;  // the same for stored (token, KV head) entries
  int64_t compressions = 0;
  int64_t compressions_skipped = 0;  // reconstruction pass found no room in the context
};

// Errors (never aborts): fewer than two tokens, chunk < 1, window < 2 or above the model's
// context, a token outside the vocabulary, invalid policy options or profile, non-finite logits.
Result<PerplexityResult> evaluate_perplexity(
    Model& model, std::span<const int32_t> tokens, const PerplexityOptions& options,
    ThreadPool& pool, const std::function<void(const PerplexityProgress&)>& on_turn = {});

}  // namespace tangram
