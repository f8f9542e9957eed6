// What it costs to bring an idle conversation back from the host-memory tier against recomputing
// it: a session of n tokens is prefilled (and compressed by the flags' KV policy), moved to the
// host tier, then its next turn is run once without it (re-prefill) and once restoring it. Used by
// `tangram bench --restore-contexts` (per context length, and its report's time-to-restore figure).
#pragma once

#include <cstdint>

#include "common/result.h"
#include "engine/engine.h"
#include "launch/engine_settings.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tangram::bench {

struct HostRestoreTiming {
  int64_t context = 0;
  double prefill_s = 0;       // first turn (prefill and compression)
  double reprefill_s = 0;     // next turn without the session: time to first token
  double host_restore_s = 0;  // the scheduler's restore time (fetch, checks, decode into the pool)
  double host_ttft_s = 0;     // next turn's time to first token with the restore
  double offload_s = 0;       // encoding into the host tier
  int64_t session_bytes = 0;  // the serialised session
  double disk_restore_s = 0;  // from the disk tier across an engine restart (0: not measured)
  double disk_ttft_s = 0;
};

// One greedy token of `prompt` as a turn of `session` (a session's next turn, timed by the
// scheduler). Errors: the request failed.
Result<RequestResult> one_token_turn(Engine& engine, std::vector<int32_t> prompt,
                                     const std::string& session);

// Errors: the engine cannot be built from the flags, a turn fails, or the next turn did not
// restore the whole session.
Result<HostRestoreTiming> measure_host_restore(Model& model, const Tokenizer& tok,
                                               const EngineSettings& flags, int64_t n_tokens,
                                               uint32_t seed);

// The same session written to the disk tier in `disk_dir` (emptied before and after), the engine
// restarted on that folder, and the next turn restoring it from disk: fills t.disk_*.
// Errors: as measure_host_restore, or the disk tier did not restore the whole session.
Status measure_disk_restore(Model& model, const Tokenizer& tok, const EngineSettings& flags,
                            const std::string& disk_dir, uint32_t seed, HostRestoreTiming& t);

}  // namespace tangram::bench
