// Drives a multi-turn workload through the real scheduler, in process, and records what
// happened: one RequestRecord per turn, time series of the KV pool and of the sequences
// running, and the scheduler's compression and preemption counters.
//
// Time is the wall clock while the engine has work; when it has none (every conversation is
// waiting for its arrival or thinking), the clock jumps to the next arrival or end of a think
// time instead of sleeping there. No request is queued or running across a jump, so every
// latency is wall time, and a run's length is what it would be in real time.
//
// Closed loop: `concurrency` conversations are active at once; when one ends the next starts.
// Open loop: conversations start at their arrival times. Within a conversation, each turn is
// submitted after the previous answer plus the turn's think time, with the whole conversation so
// far as the prompt and the conversation's id as session id, so the scheduler reuses the resident
// KV exactly as it would for a chat client.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/thread_pool.h"
#include "evaluation/metrics.h"
#include "evaluation/workload.h"
#include "model/model.h"
#include "scheduler/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace tangram {

struct WorkloadRun {
  std::vector<RequestRecord> records;  // [requests] one per turn, in finishing order
  double wall_s = 0;                   // the run's clock at the end (idle gaps included)
  double busy_s = 0;                   // wall time the engine spent in scheduler steps
  double idle_skipped_s = 0;           // idle time the clock jumped over (part of wall_s)
  SchedulerStats stats;                // scheduler counters at the end
  TimeSeries kv_used_bytes;            // pool bytes in use over time
  TimeSeries kv_wasted_slots;          // allocated but empty slots over time
  TimeSeries running;                  // sequences running over time
  int64_t peak_running = 0;
  double peak_kv_bytes = 0;
  double mean_waste_fraction =
      0;  // allocated-but-empty share of the pool's used slots, mean over steps
  std::vector<double>
      session_kv_bytes_by_turn;          // [turns] mean resident KV of a session after turn t
  double kv_bytes_per_cached_token = 0;  // resident KV bytes / positions they cover, at the end
  double attention_imbalance = 0;        // mean predicted slowest-thread / mean, per plan
};

// Runs every conversation to its end. on_progress(done_turns, total_turns) is called as turns
// finish; `sessions` gives the tiers idle conversations move down to (none by default). Errors:
// a request the scheduler refuses (e.g. a prompt past the context).
Result<WorkloadRun> run_workload(Model& model, const Tokenizer& tokenizer, ThreadPool& pool,
                                 const SchedulerOptions& options,
                                 const std::vector<Conversation>& conversations,
                                 const WorkloadSpec& spec,
                                 const std::function<void(int64_t, int64_t)>& on_progress = {},
                                 const SessionKeeperOptions& sessions = {});

}  // namespace tangram
