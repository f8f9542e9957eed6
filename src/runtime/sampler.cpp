#include "runtime/sampler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

namespace tangram {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kMaxFloat = std::numeric_limits<float>::max();
// Up to this k, top-k streams over the logits with a heap; above it nth_element is cheaper.
constexpr size_t kStreamingTopKMax = 4096;
// top-p histogram: 1024 buckets over the 32 nats below the best logit (0.03 nats each).
constexpr size_t kMassBuckets = 1024;
constexpr float kMassRange = 32.0f;

// Strict "more likely" order: higher logit first, lower id on ties. It is total (ids are
// unique), so every sort and selection below is deterministic.
bool more_likely(const TokenProb& a, const TokenProb& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Replaces every value validate() would reject with the field's default.
SamplingParams sanitized(const SamplingParams& in) {
  if (in.validate().ok()) return in;
  const SamplingParams def;
  SamplingParams p = in;
  if (!(p.temperature >= 0.0f && p.temperature <= 100.0f)) p.temperature = def.temperature;
  if (p.top_k < 0) p.top_k = def.top_k;
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) p.top_p = def.top_p;
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) p.min_p = def.min_p;
  if (!(p.repetition_penalty > 0.0f && std::isfinite(p.repetition_penalty))) {
    p.repetition_penalty = def.repetition_penalty;
  }
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f)) {
    p.presence_penalty = def.presence_penalty;
  }
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f)) {
    p.frequency_penalty = def.frequency_penalty;
  }
  if (p.penalty_last_n < -1) p.penalty_last_n = def.penalty_last_n;
  if (p.max_tokens < 0) p.max_tokens = def.max_tokens;
  std::erase_if(p.stop, [](const std::string& s) { return s.empty(); });
  return p;
}

uint64_t random_seed() {
  try {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ static_cast<uint64_t>(device());
  } catch (...) {
    // No entropy source: the clock still differs between runs, which is all an unset seed needs.
    return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
}

}  // namespace

Result<Sampler> Sampler::create(const SamplingParams& params) {
  TG_TRY(params.validate());
  return Sampler(params);
}

Sampler::Sampler(const SamplingParams& params)
    : params_(sanitized(params)),
      seed_(params_.seed_set ? params_.seed : random_seed()),
      rng_(seed_) {}

int32_t Sampler::sample(float* logits, int n_vocab, std::span<const int32_t> history) {
  const std::span<const TokenProb> dist = distribution(logits, n_vocab, history);
  if (dist.empty()) return -1;
  if (dist.size() == 1) return dist[0].id;  // nothing to draw: leave the random stream alone
  double total = 0.0;
  for (const TokenProb& c : dist) total += static_cast<double>(c.prob);
  const double r = next_uniform() * total;
  double cumulative = 0.0;
  for (const TokenProb& c : dist) {
    cumulative += static_cast<double>(c.prob);
    if (r < cumulative) return c.id;
  }
  // Rounding put r at the very top: the last token with any probability owns it.
  for (auto it = dist.rbegin(); it != dist.rend(); ++it) {
    if (it->prob > 0.0f) return it->id;
  }
  return dist[0].id;
}

std::span<const TokenProb> Sampler::distribution(float* logits, int n_vocab,
                                                 std::span<const int32_t> history) {
  candidates_.clear();
  if (logits == nullptr || n_vocab <= 0) return {};
  apply_bans(logits, n_vocab);
  apply_penalties(logits, n_vocab, history);

  if (params_.temperature == 0.0f) {
    // Greedy. NaN never compares greater, and `>` keeps the first (lowest) id on ties.
    int32_t best = 0;
    float best_logit = kNegInf;
    for (int32_t i = 0; i < n_vocab; ++i) {
      if (logits[i] > best_logit) {
        best_logit = logits[i];
        best = i;
      }
    }
    candidates_.push_back({best, logits[best], 1.0f});
    return candidates_;
  }

  filter(logits, n_vocab);
  if (candidates_.size() == 1) {
    candidates_[0].prob = 1.0f;  // also covers "no finite logit", where the softmax is undefined
    return candidates_;
  }

  // Softmax of logit / temperature over the survivors, max-subtracted so exp never overflows.
  float l_max = kNegInf;
  for (const TokenProb& c : candidates_) l_max = std::max(l_max, c.logit);
  const double inv_temperature = 1.0 / static_cast<double>(params_.temperature);
  double total = 0.0;
  for (TokenProb& c : candidates_) {
    // The product in double: at tiny temperatures 1/T overflows float (0 * inf = NaN).
    const auto scaled = static_cast<float>(
        (static_cast<double>(c.logit) - static_cast<double>(l_max)) * inv_temperature);
    c.prob = std::exp(scaled);
    total += static_cast<double>(c.prob);
  }
  for (TokenProb& c : candidates_) {
    c.prob = static_cast<float>(static_cast<double>(c.prob) / total);
  }
  return candidates_;
}

void Sampler::filter(const float* logits, int n_vocab) {
  const size_t top_k = static_cast<size_t>(params_.top_k);
  bool sorted = false;
  if (top_k > 0 && top_k <= kStreamingTopKMax && top_k < static_cast<size_t>(n_vocab)) {
    select_top_k(logits, n_vocab, top_k);
    sorted = true;
  } else {
    // Every token with a logit above -inf (NaN excluded); +inf becomes the largest float so
    // that differences stay finite.
    candidates_.reserve(static_cast<size_t>(n_vocab));
    for (int32_t i = 0; i < n_vocab; ++i) {
      if (logits[i] > kNegInf) candidates_.push_back({i, std::min(logits[i], kMaxFloat), 0.0f});
    }
    if (top_k > 0 && top_k < candidates_.size()) {
      const auto kth = candidates_.begin() + static_cast<std::ptrdiff_t>(top_k);
      std::nth_element(candidates_.begin(), kth, candidates_.end(), more_likely);
      candidates_.resize(top_k);
      std::sort(candidates_.begin(), candidates_.end(), more_likely);
      sorted = true;
    }
  }
  if (candidates_.empty()) {
    candidates_.push_back({0, logits[0], 0.0f});  // nothing is possible: lowest id, as greedy
    return;
  }

  float l_max = candidates_.front().logit;
  if (!sorted) {
    for (const TokenProb& c : candidates_) l_max = std::max(l_max, c.logit);
  }
  if (params_.top_p < 1.0f) {
    if (sorted) {
      cut_top_p_sorted(l_max);
    } else {
      cut_top_p_unsorted(l_max);
    }
  }
  // min-p: p / p_max = exp(l - l_max) whatever the normaliser, so it is a fixed logit threshold.
  // The most likely token always passes (0 >= ln(min_p)), so the set never becomes empty.
  if (params_.min_p > 0.0f) {
    const double threshold = std::log(static_cast<double>(params_.min_p));
    std::erase_if(candidates_, [&](const TokenProb& c) {
      return static_cast<double>(c.logit) - static_cast<double>(l_max) < threshold;
    });
  }
}

void Sampler::select_top_k(const float* logits, int n_vocab, size_t k) {
  // Min-heap under more_likely: the front is the weakest of the k kept so far. Ids arrive in
  // increasing order, so a later equal logit is less likely and strict > is the right test.
  candidates_.reserve(k);
  int32_t i = 0;
  for (; i < n_vocab && candidates_.size() < k; ++i) {
    if (logits[i] > kNegInf) candidates_.push_back({i, std::min(logits[i], kMaxFloat), 0.0f});
  }
  std::make_heap(candidates_.begin(), candidates_.end(), more_likely);
  float weakest = candidates_.empty() ? kNegInf : candidates_.front().logit;
  for (; i < n_vocab; ++i) {
    if (!(logits[i] > weakest)) continue;  // also skips NaN
    std::pop_heap(candidates_.begin(), candidates_.end(), more_likely);
    candidates_.back() = {i, std::min(logits[i], kMaxFloat), 0.0f};
    std::push_heap(candidates_.begin(), candidates_.end(), more_likely);
    weakest = candidates_.front().logit;
  }
  std::sort_heap(candidates_.begin(), candidates_.end(), more_likely);
}

void Sampler::cut_top_p_sorted(float l_max) {
  double mass = 0.0;
  for (TokenProb& c : candidates_) {
    c.prob = std::exp(c.logit - l_max);  // unnormalised weight, reused for the walk
    mass += static_cast<double>(c.prob);
  }
  const double target = static_cast<double>(params_.top_p) * mass;
  double cumulative = 0.0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    cumulative += static_cast<double>(candidates_[i].prob);
    if (cumulative >= target) {
      candidates_.resize(i + 1);
      return;
    }
  }
  // Rounding kept the sum just short of target: every candidate stays.
}

void Sampler::cut_top_p_unsorted(float l_max) {
  // Histogram of the mass by distance below the best logit. Tokens more than kMassRange nats
  // down (weight < e^-32) share the last bucket.
  constexpr float kScale = static_cast<float>(kMassBuckets) / kMassRange;
  constexpr float kLastBucket = static_cast<float>(kMassBuckets - 1);
  const auto bucket_of = [&](const TokenProb& c) {
    const float position = (l_max - c.logit) * kScale;  // >= 0; +inf for extreme gaps
    return position < kLastBucket ? static_cast<size_t>(position) : kMassBuckets - 1;
  };
  bucket_mass_.assign(kMassBuckets, 0.0);
  double mass = 0.0;
  for (TokenProb& c : candidates_) {
    c.prob = std::exp(c.logit - l_max);  // unnormalised weight
    mass += static_cast<double>(c.prob);
    bucket_mass_[bucket_of(c)] += static_cast<double>(c.prob);
  }
  const double target = static_cast<double>(params_.top_p) * mass;
  double before = 0.0;  // mass of the buckets above the crossing one
  size_t crossing = 0;
  while (crossing < kMassBuckets && before + bucket_mass_[crossing] < target) {
    before += bucket_mass_[crossing++];
  }
  if (crossing == kMassBuckets) return;  // rounding: the target is never reached, keep all
  // [above the crossing bucket, kept whole][crossing bucket, sorted and walked][below, dropped]
  const auto inside = std::partition(candidates_.begin(), candidates_.end(),
                                     [&](const TokenProb& c) { return bucket_of(c) < crossing; });
  const auto below = std::partition(inside, candidates_.end(),
                                    [&](const TokenProb& c) { return bucket_of(c) == crossing; });
  std::sort(inside, below, more_likely);
  double cumulative = before;
  for (auto it = inside; it != below; ++it) {
    cumulative += static_cast<double>(it->prob);
    if (cumulative >= target) {
      candidates_.erase(it + 1, candidates_.end());
      return;
    }
  }
  candidates_.erase(below, candidates_.end());
}

void Sampler::apply_bans(float* logits, int n_vocab) const {
  if (!params_.ignore_eos) return;
  for (const int32_t id : eos_ids_) {
    if (id >= 0 && id < n_vocab) logits[id] = kNegInf;
  }
}

void Sampler::apply_penalties(float* logits, int n_vocab, std::span<const int32_t> history) {
  const float repetition = params_.repetition_penalty;
  const float presence = params_.presence_penalty;
  const float frequency = params_.frequency_penalty;
  if (repetition == 1.0f && presence == 0.0f && frequency == 0.0f) return;
  if (params_.penalty_last_n == 0 || history.empty()) return;
  const size_t window_size =
      params_.penalty_last_n < 0
          ? history.size()
          : std::min(history.size(), static_cast<size_t>(params_.penalty_last_n));
  // Count each distinct in-range token of the window in O(window): a per-vocabulary counter,
  // cleared again through the list of tokens touched.
  if (token_counts_.size() < static_cast<size_t>(n_vocab)) {
    token_counts_.assign(static_cast<size_t>(n_vocab), 0);
  }
  seen_tokens_.clear();
  for (const int32_t token : history.last(window_size)) {
    if (token < 0 || token >= n_vocab) continue;
    if (token_counts_[static_cast<size_t>(token)]++ == 0) seen_tokens_.push_back(token);
  }
  for (const int32_t token : seen_tokens_) {
    int32_t& count = token_counts_[static_cast<size_t>(token)];
    float logit = logits[token];
    if (repetition != 1.0f) logit = logit > 0.0f ? logit / repetition : logit * repetition;
    logit -= static_cast<float>(count) * frequency + presence;
    logits[token] = logit;
    count = 0;
  }
}

void Sampler::accept(int32_t token) {
  static_cast<void>(token);  // the id itself is not kept: `history` is the authority
  ++n_accepted_;
}

bool Sampler::max_tokens_reached() const {
  return params_.max_tokens > 0 && n_accepted_ >= params_.max_tokens;
}

void Sampler::set_eos_tokens(std::vector<int32_t> eos_ids) { eos_ids_ = std::move(eos_ids); }

double Sampler::next_uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

}  // namespace tangram
