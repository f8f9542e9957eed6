#include "evaluation/workload.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "evaluation/seeded_rng.h"

namespace tangram {
namespace {

constexpr int64_t kMaxLength = int64_t{1} << 24;           // one message or answer, in tokens
constexpr double kMaxWorkloadTokens = 64.0 * 1024 * 1024;  // all user tokens, worst case (256 MiB)
constexpr double kMaxJitter = 4.0;
constexpr double kClipFactor = 4.0;         // lengths are clipped to [1, kClipFactor x mean]
constexpr int32_t kFirstOrdinaryToken = 3;  // ids 0..2 are usually BOS / EOS / padding

// Stream ids: each conversation, the shared context and the arrival process draw independently.
constexpr uint64_t kStreamContext = 0xC0;
constexpr uint64_t kStreamArrivals = 0xA1;
constexpr uint64_t kStreamFirstSession = 0x1000;
// Think times draw from their own per-conversation streams, so drawing them leaves every
// conversation's tokens and lengths as they are without think times.
constexpr uint64_t kStreamFirstThinkTime = 0x100000;

// Clipped log-normal with the given mean and coefficient of variation `jitter`.
int64_t draw_length(SeededRng& rng, int64_t mean, double jitter) {
  if (jitter <= 0.0) return mean;
  const double mean_d = static_cast<double>(mean);
  const double sigma2 = std::log1p(jitter * jitter);
  const double mu = std::log(mean_d) - 0.5 * sigma2;
  const double x = std::exp(mu + std::sqrt(sigma2) * rng.normal());
  const double clipped = std::clamp(x, 1.0, kClipFactor * mean_d);
  return std::max<int64_t>(1, std::llround(clipped));
}

WorkloadSpec base_preset(std::string_view name) {
  WorkloadSpec s;
  s.preset = std::string(name);
  s.seed = 1;
  s.vocab = 32000;
  s.arrival = WorkloadSpec::Arrival::ClosedLoop;
  s.request_rate = 0.5;
  s.think_time_s = 0.0;
  if (name == "scbench") {
    s.sessions = 8;
    s.turns = 4;
    s.first_turn_tokens = 2048;
    s.followup_tokens = 32;
    s.output_tokens = 32;
    s.length_jitter = 0.25;
    s.concurrency = 4;
    s.shared_context = true;
  } else if (name == "locomo") {
    s.sessions = 6;
    s.turns = 8;
    s.first_turn_tokens = 256;
    s.followup_tokens = 256;
    s.output_tokens = 64;
    s.length_jitter = 0.3;
    s.concurrency = 3;
  } else if (name == "service") {
    // 20 conversations of 3 turns: both runs of the default job (10 policy runs) in about 25
    // minutes on 2 cores (docs/benchmarks.md, "Why these sizes"), the pool holding 3 under full KV.
    s.sessions = 20;
    s.turns = 3;
    s.first_turn_tokens = 512;
    s.followup_tokens = 64;
    s.output_tokens = 32;
    s.length_jitter = 0.3;
    s.concurrency = 4;
    s.arrival = WorkloadSpec::Arrival::OpenLoop;
    s.think_time_s = 12.0;
    s.think_time_dist = WorkloadSpec::ThinkTime::Exponential;
  } else {  // sharegpt
    s.sessions = 16;
    s.turns = 3;
    s.first_turn_tokens = 96;
    s.followup_tokens = 96;
    s.output_tokens = 128;
    s.length_jitter = 0.5;
    s.concurrency = 8;
    s.request_rate = 1.0;
  }
  return s;
}

bool finite_non_negative(double v) { return std::isfinite(v) && v >= 0.0; }

}  // namespace

std::vector<std::string> workload_preset_names() {
  return {"scbench", "locomo", "sharegpt", "service"};
}

Result<WorkloadSpec> workload_preset(std::string_view name) {
  constexpr std::string_view kQuick = "-quick";
  const bool quick = name.size() > kQuick.size() && name.ends_with(kQuick);
  const std::string_view base = quick ? name.substr(0, name.size() - kQuick.size()) : name;
  const auto names = workload_preset_names();
  if (std::find(names.begin(), names.end(), base) == names.end())
    return make_error("unknown workload preset '{}' (known: {}, each also with -quick)", name,
                      fmt::join(names, ", "));
  const WorkloadSpec spec = base_preset(base);
  return quick ? scale_for_quick(spec) : spec;
}

WorkloadSpec scale_for_quick(const WorkloadSpec& spec) {
  WorkloadSpec q = spec;
  q.preset = spec.preset + "-quick";
  if (spec.think_time_dist == WorkloadSpec::ThinkTime::Exponential) {
    // A service stays a service: many conversations, most of them thinking at any moment. Its
    // clock runs 3x faster (arrivals 3x as often, thinking a third as long), so that in a run of a
    // minute or two the conversations still outnumber what full KV holds and the engine is kept
    // busy: at the full run's pace so few arrive that arrivals, not KV memory, would set every
    // policy's throughput.
    q.sessions = std::min(spec.sessions, 16);
    q.request_rate = spec.request_rate * 3.0;
    q.think_time_s = spec.think_time_s / 3.0;
    q.turns = std::clamp(spec.turns, 1, 3);
    q.first_turn_tokens = std::max<int64_t>(16, spec.first_turn_tokens / 2);
    q.followup_tokens = std::max<int64_t>(8, spec.followup_tokens / 2);
    q.output_tokens = std::max<int64_t>(8, spec.output_tokens / 2);
    q.concurrency = std::clamp(spec.concurrency, 1, q.sessions);
    return q;
  }
  q.sessions = std::clamp(spec.sessions / 2, 1, 4);
  q.turns = std::clamp(spec.turns, 1, 3);
  q.first_turn_tokens = std::max<int64_t>(16, spec.first_turn_tokens / 4);
  q.followup_tokens = std::max<int64_t>(8, spec.followup_tokens / 2);
  q.output_tokens = std::max<int64_t>(8, spec.output_tokens / 4);
  q.think_time_s = 0.0;
  q.concurrency = std::clamp(spec.concurrency, 1, q.sessions);
  return q;
}

Status validate_workload(const WorkloadSpec& s) {
  if (s.sessions < 1) return make_error("workload: sessions must be >= 1 (got {})", s.sessions);
  if (s.turns < 1) return make_error("workload: turns must be >= 1 (got {})", s.turns);
  const auto check_length = [](const char* what, int64_t v) -> Status {
    if (v < 1 || v > kMaxLength)
      return make_error("workload: {} must be in [1, {}] (got {})", what, kMaxLength, v);
    return Status::Ok();
  };
  TG_TRY(check_length("first_turn_tokens", s.first_turn_tokens));
  TG_TRY(check_length("followup_tokens", s.followup_tokens));
  TG_TRY(check_length("output_tokens", s.output_tokens));
  if (!(s.length_jitter >= 0.0 && s.length_jitter <= kMaxJitter))
    return make_error("workload: length_jitter must be in [0, {}] (got {})", kMaxJitter,
                      s.length_jitter);
  if (!finite_non_negative(s.think_time_s))
    return make_error("workload: think_time_s must be finite and >= 0 (got {})", s.think_time_s);
  if (s.concurrency < 1)
    return make_error("workload: concurrency must be >= 1 (got {})", s.concurrency);
  if (s.arrival == WorkloadSpec::Arrival::OpenLoop &&
      !(std::isfinite(s.request_rate) && s.request_rate > 0.0))
    return make_error("workload: open-loop request_rate must be finite and > 0 (got {})",
                      s.request_rate);
  if (s.vocab <= kFirstOrdinaryToken)
    return make_error("workload: vocab must be > {} (got {})", kFirstOrdinaryToken, s.vocab);
  // Worst case with every draw at the clip limit; computed in double so nothing overflows.
  const double per_session =
      kClipFactor * (static_cast<double>(s.first_turn_tokens) +
                     static_cast<double>(s.turns) * static_cast<double>(s.followup_tokens));
  if (static_cast<double>(s.sessions) * per_session > kMaxWorkloadTokens)
    return make_error("workload: {} sessions x {} turns at these lengths may exceed {} tokens",
                      s.sessions, s.turns, kMaxWorkloadTokens);
  return Status::Ok();
}

Result<std::vector<Conversation>> generate_workload(const WorkloadSpec& s) {
  TG_TRY(validate_workload(s));

  std::vector<int32_t> shared_context;  // [n_context_tokens]
  if (s.shared_context) {
    SeededRng rng(s.seed, kStreamContext);
    append_random_tokens(rng, draw_length(rng, s.first_turn_tokens, s.length_jitter), s.vocab,
                         shared_context);
  }

  std::vector<Conversation> out(static_cast<size_t>(s.sessions));
  SeededRng arrivals(s.seed, kStreamArrivals);
  double clock_s = 0.0;
  for (int i = 0; i < s.sessions; ++i) {
    Conversation& c = out[static_cast<size_t>(i)];
    c.id = fmt::format("{}-{}", s.preset, i);
    if (s.arrival == WorkloadSpec::Arrival::OpenLoop) {
      // Poisson process: the first session opens the run, then exponential gaps.
      if (i > 0) clock_s += arrivals.exponential(1.0 / s.request_rate);
      c.arrival_s = clock_s;
    }
    SeededRng rng(s.seed, kStreamFirstSession + static_cast<uint64_t>(i));
    c.turns.resize(static_cast<size_t>(s.turns));
    for (int t = 0; t < s.turns; ++t) {
      Turn& turn = c.turns[static_cast<size_t>(t)];
      if (t == 0 && s.shared_context) {
        turn.user_tokens = shared_context;
        append_random_tokens(rng, draw_length(rng, s.followup_tokens, s.length_jitter), s.vocab,
                             turn.user_tokens);
      } else {
        const int64_t mean = t == 0 ? s.first_turn_tokens : s.followup_tokens;
        append_random_tokens(rng, draw_length(rng, mean, s.length_jitter), s.vocab,
                             turn.user_tokens);
      }
      turn.output_tokens = draw_length(rng, s.output_tokens, s.length_jitter);
      turn.think_time_s = t == 0 ? 0.0 : s.think_time_s;
    }
    if (s.think_time_dist == WorkloadSpec::ThinkTime::Exponential && s.think_time_s > 0.0) {
      SeededRng think(s.seed, kStreamFirstThinkTime + static_cast<uint64_t>(i));
      for (size_t t = 1; t < c.turns.size(); ++t)
        c.turns[t].think_time_s =
            std::min(think.exponential(s.think_time_s), kClipFactor * s.think_time_s);
    }
  }
  return out;
}

Status validate_conversation(const Conversation& c) {
  if (!finite_non_negative(c.arrival_s))
    return make_error("arrival_s must be finite and >= 0 (got {})", c.arrival_s);
  if (c.turns.empty()) return make_error("a conversation needs at least one turn");
  for (size_t t = 0; t < c.turns.size(); ++t) {
    const Turn& turn = c.turns[t];
    const bool has_tokens = !turn.user_tokens.empty();
    const bool has_text = !turn.user_text.empty();
    if (has_tokens == has_text)
      return make_error("turn {}: needs exactly one of user tokens or user_text (got {})", t,
                        has_tokens ? "both" : "neither");
    for (const int32_t id : turn.user_tokens)
      if (id < 0) return make_error("turn {}: negative token id {}", t, id);
    if (turn.output_tokens < 1 || turn.output_tokens > kMaxLength)
      return make_error("turn {}: output_tokens must be in [1, {}] (got {})", t, kMaxLength,
                        turn.output_tokens);
    if (!finite_non_negative(turn.think_time_s))
      return make_error("turn {}: think_time_s must be finite and >= 0 (got {})", t,
                        turn.think_time_s);
  }
  return Status::Ok();
}

Status check_token_range(const std::vector<Conversation>& conversations, int32_t vocab) {
  for (const Conversation& c : conversations)
    for (size_t t = 0; t < c.turns.size(); ++t)
      for (const int32_t id : c.turns[t].user_tokens)
        if (id < 0 || id >= vocab)
          return make_error("conversation '{}' turn {}: token id {} outside the vocabulary [0, {})",
                            c.id, t, id, vocab);
  return Status::Ok();
}

void append_random_tokens(SeededRng& rng, int64_t count, int64_t vocab, std::vector<int32_t>& out) {
  out.reserve(out.size() + static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    out.push_back(static_cast<int32_t>(rng.uniform_int(kFirstOrdinaryToken, vocab)));
}

std::vector<int32_t> random_tokens(int64_t count, int64_t vocab, uint64_t seed) {
  constexpr int64_t kRandomPromptVocab = 32000;
  SeededRng rng(seed, 0);
  std::vector<int32_t> out;
  append_random_tokens(rng, count, std::min(vocab, kRandomPromptVocab), out);
  return out;
}

}  // namespace tangram
