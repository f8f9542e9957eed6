// Seeded multi-turn conversation workloads for `tangram bench`, at the token level: the benchmark
// feeds token ids straight to the engine, so no tokenizer is involved and a seed names one workload
// exactly (see seeded_rng.h), on any machine.
//
// Presets mirror the shapes of the published evaluations, scaled down so that a run over four KV
// policies fits a 2-core CPU (a few minutes; the `-quick` variants aim at under 2 minutes on a
// small model):
//
//   preset    shape (mean lengths in tokens)                          published original
//   scbench   8 sessions share one ~2048-token context; 4 questions   SCBench: 10K-100K+ shared
//             of ~32 tokens each (the first comes with the context);  contexts, multi-request and
//             answers ~32; jitter 0.25; closed loop, concurrency 4    multi-turn follow-up queries
//   locomo    6 sessions of 8 turns; ~256-token messages, answers     LoCoMo: ~300 turns, ~9K
//             ~64, so histories reach ~2.5K tokens; jitter 0.3;       tokens of chat history per
//             closed loop, concurrency 3                              conversation
//   sharegpt  16 sessions of 3 turns; ~96-token user messages,        ShareGPT: short chats with
//             ~128-token answers; jitter 0.5; closed loop, conc. 8    wide length spread
//   service   20 conversations of 3 turns arriving open loop (0.5/s); a multi-turn chat service:
//             ~512-token first messages, ~64-token follow-ups,        many more conversations
//             ~32-token answers; jitter 0.3; think time before each   than KV memory, most idle
//             follow-up exponential, mean 12 s (clipped at 4x)        between turns
//
// Every preset uses vocab 32000 and seed 1: callers set `vocab` to the model's vocabulary size.
// Open-loop runs (arrival = OpenLoop) use request_rate 0.5 sessions/s (scbench, locomo) or 1.0
// (sharegpt) unless the caller sets it. Quick variants, e.g. scbench-quick: 4 sessions x 3 turns,
// a 512-token shared context, 16-token questions, 8-token answers.
//
// Recorded conversations are replayed from JSONL traces: see trace.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "evaluation/seeded_rng.h"

namespace tangram {

struct WorkloadSpec {
  enum class Arrival { ClosedLoop, OpenLoop };

  std::string preset = "custom";    // names the conversations ("<preset>-<index>")
  int sessions = 8;                 // conversations in the workload
  int turns = 3;                    // user turns per conversation
  int64_t first_turn_tokens = 256;  // first user message (with shared_context: the shared context)
  int64_t followup_tokens = 64;     // later user messages (with shared_context: every question)
  int64_t output_tokens = 64;       // tokens generated per turn
  // Relative spread (coefficient of variation) of every length: lengths are drawn from a
  // log-normal with the stated mean and this CV, rounded and clipped to [1, 4 x mean]. 0 = exact.
  double length_jitter = 0.0;
  double think_time_s = 0.0;  // pause before each turn after the first (its mean when drawn)
  // Constant: every pause is think_time_s. Exponential: each pause is drawn (the conversation's
  // own stream of the seed) from an exponential with that mean, clipped to 4 x mean.
  enum class ThinkTime { Constant, Exponential };
  ThinkTime think_time_dist = ThinkTime::Constant;
  Arrival arrival = Arrival::ClosedLoop;
  int concurrency = 4;        // closed loop: sessions active at once (used by the runner)
  double request_rate = 1.0;  // open loop: Poisson arrivals of new sessions per second
  uint64_t seed = 1;
  int32_t vocab = 32000;  // token ids are drawn uniformly in [3, vocab); 0..2 are specials
  // SCBench-like: every conversation's first turn is one shared context (first_turn_tokens long,
  // drawn once) followed by that session's own question (followup_tokens long).
  bool shared_context = false;
};

struct Turn {
  std::vector<int32_t> user_tokens;  // [n_user_tokens]; empty when user_text is used
  std::string user_text;             // from a trace's "user_text"; the caller tokenises it
  int64_t output_tokens = 0;
  double think_time_s = 0.0;

  bool operator==(const Turn&) const = default;
};

struct Conversation {
  std::string id;
  double arrival_s = 0.0;  // open loop: session start, seconds from run start; 0 for closed loop
  std::vector<Turn> turns;

  bool operator==(const Conversation&) const = default;
};

// "scbench", "locomo", "sharegpt", "service", or any of them with "-quick" (scale_for_quick
// applied).
Result<WorkloadSpec> workload_preset(std::string_view name);
// The base preset names, for help texts.
std::vector<std::string> workload_preset_names();
// A smaller version of spec for `--quick`: at most 4 sessions and 3 turns, the first turn / shared
// context a quarter as long, follow-ups half, outputs a quarter (floors of 16 / 8 / 8 tokens), no
// think time. Sized so four policies over the scbench preset finish in under 2 minutes on a
// small model on 2 cores. A service workload (drawn think times) keeps 16 conversations, halves
// its messages and runs its clock 3x faster (arrivals 3x as often, think times a third), so as
// many conversations overlap as in the full run and KV memory still binds. The preset name gains
// "-quick".
WorkloadSpec scale_for_quick(const WorkloadSpec& spec);

// Checks ranges: sessions and turns >= 1, lengths >= 1, jitter in [0, 4], think time >= 0,
// concurrency >= 1, request_rate > 0 for open loop, vocab >= 4, and a total size that fits memory.
Status validate_workload(const WorkloadSpec& spec);
// Deterministic for a given spec (seed included). Conversation i depends only on the seed and i,
// so adding sessions keeps the earlier ones unchanged. Errors are validate_workload's.
Result<std::vector<Conversation>> generate_workload(const WorkloadSpec& spec);

// Value checks shared by save and load (the JSON shape aside): non-empty turns, exactly one of
// user tokens / user text per turn, non-negative token ids, output_tokens >= 1, finite
// non-negative times.
Status validate_conversation(const Conversation& conversation);
// Every token id in [0, vocab): run before feeding a loaded trace to a model.
Status check_token_range(const std::vector<Conversation>& conversations, int32_t vocab);

// The one random-prompt generator of the benchmarks (ids drawn by SeededRng, so a seed names the
// same tokens under every standard library). Appends `count` ids uniform in [3, vocab): 0..2 are
// usually BOS / EOS / padding. Requires vocab > 3.
void append_random_tokens(SeededRng& rng, int64_t count, int64_t vocab, std::vector<int32_t>& out);
// `count` ids uniform in [3, min(vocab, 32000)) from stream 0 of `seed`: the cap keeps random
// prompts among a vocabulary's ordinary pieces rather than its added tokens at the end.
std::vector<int32_t> random_tokens(int64_t count, int64_t vocab, uint64_t seed);

}  // namespace tangram
