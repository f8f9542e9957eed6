// The oversubscribed multi-turn workload of `tangram bench --oversubscription`: S conversations
// take turns (closed loop, `concurrency` at a time) in a KV pool that holds only about S / 10 of
// them, once with no tiers (an evicted conversation's next turn recomputes its whole history),
// once with the host-memory tier and once with the disk tier (evicted conversations are restored).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "launch/engine_settings.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tangram::bench {

struct OversubscribedOptions {
  int sessions = 0;              // conversations (0: the workload is not run)
  double oversubscription = 10;  // sessions per session the pool holds
  int turns = 3;                 // turns per conversation
  int64_t first_tokens = 512;    // first turn's prompt
  int64_t followup_tokens = 32;  // each later turn's new user text
  int gen_tokens = 16;           // tokens generated per turn
  int concurrency = 2;           // turns in flight at once
  std::string disk_dir;          // disk tier folder (a temp one if empty)
};

// Runs the three configurations, prints a table, and returns the figures.
Result<nlohmann::json> run_oversubscribed(Model& model, const Tokenizer& tok,
                                          const EngineSettings& engine,
                                          const OversubscribedOptions& opt);

}  // namespace tangram::bench
