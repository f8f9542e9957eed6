// Turns one step's logits into a token: penalties, then greedy or filtered random sampling.
//
// Order of operations, and why:
//   1. Bans: with ignore_eos, the EOS tokens' logits become -inf, so the model keeps talking
//      instead of producing an EOS the caller would have to skip.
//   2. Penalties, in place on the logits, over the last penalty_last_n tokens of `history`:
//      repetition penalty first (CTRL / llama.cpp: a positive logit is divided by it, a
//      non-positive one multiplied, so the token always becomes less likely for a penalty > 1),
//      then OpenAI's  logit -= count * frequency_penalty + (count > 0) * presence_penalty.
//      Penalties reshape the model's preferences, so every later step, greedy included, sees them.
//   3. temperature == 0: greedy argmax (ties go to the lowest id). No randomness is consumed.
//   4. Otherwise the filters, each on the distribution left by the one before, all judged at
//      temperature 1 (the model's own probabilities):
//        top-k  keep the k highest logits (ties broken by lower id);
//        top-p  keep the shortest most-likely-first prefix whose mass (renormalised over the
//               top-k survivors) reaches top_p;
//        min-p  keep tokens with p >= min_p * p_max.
//      Temperature comes last ("temperature last", as the min-p authors recommend): the filters
//      decide *which* tokens are plausible from the model's own confidence, and temperature only
//      reshapes the odds among the survivors, so a high temperature cannot revive tail junk.
//   5. Softmax of survivor_logit / temperature (max-subtracted, sums in double) and one
//      draw from a seeded std::mt19937_64 (53-bit uniform, independent of the standard
//      library's distribution classes so a seed reproduces across platforms).
//
// Cost for a vocabulary of n (e.g. 150k): a few O(n) passes, no full sort.
//   top-k <= 4096: one streaming pass keeping a k-element heap (most logits lose a single
//     comparison against the heap's weakest entry); larger k: nth_element + sort of k.
//   top-p over a sorted top-k: a walk. top-p without top-k: one pass computes exp(l - l_max)
//     and a histogram of that mass over 1024 logit buckets (0.03 nats wide); the bucket where
//     the cumulative mass crosses top_p is the only one sorted, everything above it is kept.
//   min-p: a fixed logit threshold l >= l_max + ln(min_p) (p / p_max does not depend on the
//     normaliser), one pass. All filters off: the softmax over every finite logit, O(n).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "runtime/sampling_params.h"

namespace tangram {

// One surviving token: its (penalised) logit and its final sampling probability.
struct TokenProb {
  int32_t id = 0;
  float logit = 0.0f;
  float prob = 0.0f;
};

class Sampler {
 public:
  // Validates params first; the usual way to build a sampler from a request.
  static Result<Sampler> create(const SamplingParams& params);
  // `params` should have passed validate(); any value it would reject (NaN included) is
  // replaced by that field's default (empty stop strings are dropped), so misuse can never
  // read out of bounds.
  explicit Sampler(const SamplingParams& params);

  // logits: [n_vocab], modified in place (bans and penalties). history: every token so far,
  // prompt included (ids outside [0, n_vocab) are ignored). Returns the chosen id, or -1 when
  // n_vocab <= 0 or logits is null. NaN logits count as -inf; if no logit is finite-or-+inf the
  // lowest id is returned.
  int32_t sample(float* logits, int n_vocab, std::span<const int32_t> history);

  // Steps 1-5 without the draw: the survivors and their probabilities (sum 1), in no particular
  // order; greedy gives one entry. The span is valid until the next call on this sampler.
  std::span<const TokenProb> distribution(float* logits, int n_vocab,
                                          std::span<const int32_t> history);

  // Records a token committed to the sequence (drawn or forced). Counts generated tokens for
  // max_tokens; penalties always come from the `history` given to sample(), which the caller
  // keeps, so accepting does not double-count.
  void accept(int32_t token);
  int n_accepted() const { return n_accepted_; }
  // True once max_tokens (if > 0) tokens were accepted.
  bool max_tokens_reached() const;

  // End-of-sequence ids banned (logit -inf) when params.ignore_eos; ignored otherwise.
  void set_eos_tokens(std::vector<int32_t> eos_ids);

  // The seed in use: params.seed when seed_set, else the random one picked at construction.
  uint64_t seed() const { return seed_; }
  const SamplingParams& params() const { return params_; }

 private:
  void apply_bans(float* logits, int n_vocab) const;
  void apply_penalties(float* logits, int n_vocab, std::span<const int32_t> history);
  // Fills candidates_ with the survivors of top-k, top-p and min-p (prob not yet final).
  void filter(const float* logits, int n_vocab);
  // candidates_ = the k most likely finite tokens, sorted most likely first.
  void select_top_k(const float* logits, int n_vocab, size_t k);
  // Cuts candidates_ to the shortest most-likely-first prefix holding top_p of their mass.
  void cut_top_p_sorted(float l_max);
  void cut_top_p_unsorted(float l_max);
  double next_uniform();  // [0, 1), 53 random bits

  SamplingParams params_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  std::vector<int32_t> eos_ids_;
  std::vector<TokenProb> candidates_;  // [n_survivors], reused across calls
  std::vector<int32_t> token_counts_;  // [n_vocab] occurrences in the penalty window, kept 0
  std::vector<int32_t> seen_tokens_;   // [distinct tokens in the window]
  std::vector<double> bucket_mass_;    // [kMassBuckets] top-p histogram
  int n_accepted_ = 0;
};

}  // namespace tangram
