#include "evaluation/runner.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <thread>

namespace tangram {

namespace {

using Clock = std::chrono::steady_clock;

// One conversation in flight.
struct Live {
  const Conversation* conv = nullptr;
  size_t next_turn = 0;           // turn to submit next
  std::vector<int32_t> history;   // every token so far (prompts and answers)
  double ready_at = 0;            // when the next turn may be submitted
  bool in_flight = false;
  bool started = false;
  bool done = false;
};

}  // namespace

Result<WorkloadRun> run_workload(Model& model, const Tokenizer& tokenizer, ThreadPool& pool,
                                 const SchedulerOptions& options,
                                 const std::vector<Conversation>& conversations,
                                 const WorkloadSpec& spec,
                                 const std::function<void(int64_t, int64_t)>& on_progress) {
  TG_ASSIGN(std::unique_ptr<Scheduler> sched, Scheduler::create(model, tokenizer, pool, options));
  model.attention_planner().reset_stats();
  WorkloadRun run;
  const auto t0 = Clock::now();
  auto now = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };

  std::vector<Live> live(conversations.size());
  int64_t total_turns = 0;
  for (size_t i = 0; i < conversations.size(); ++i) {
    live[i].conv = &conversations[i];
    total_turns += static_cast<int64_t>(conversations[i].turns.size());
  }
  int64_t finished_turns = 0;
  size_t next_to_start = 0;  // closed loop: conversations start in order
  int active = 0;
  const bool closed = spec.arrival == WorkloadSpec::Arrival::ClosedLoop;
  const int concurrency = std::max(1, spec.concurrency);
  const double page_bytes = static_cast<double>(sched->pool().page_bytes());
  std::vector<double> kv_sum(spec.turns > 0 ? static_cast<size_t>(spec.turns) : 1, 0.0);
  std::vector<int64_t> kv_n(kv_sum.size(), 0);
  Status failure = Status::Ok();
  double waste_sum = 0;
  int64_t waste_n = 0;

  auto submit_turn = [&](size_t i) {
    Live& l = live[i];
    const Turn& turn = l.conv->turns[l.next_turn];
    l.history.insert(l.history.end(), turn.user_tokens.begin(), turn.user_tokens.end());
    Request r;
    r.prompt = l.history;
    r.params.temperature = 0;
    r.params.max_tokens = static_cast<int>(std::max<int64_t>(turn.output_tokens, 1));
    r.params.ignore_eos = true;  // exact output lengths: the same work under every policy
    r.session_id = l.conv->id;
    auto rec = std::make_shared<RequestRecord>();
    rec->session = l.conv->id;
    rec->turn = static_cast<int>(l.next_turn);
    rec->submit_s = now();
    rec->first_token_s = -1;
    r.on_token = [rec, &now](const TokenEvent&) {
      if (rec->first_token_s < 0) rec->first_token_s = now();
    };
    r.on_finish = [rec, i, &live, &run, &now, &finished_turns, &active, &on_progress, total_turns,
                   &sched, &kv_sum, &kv_n, page_bytes, &spec](const RequestResult& res) {
      Live& lv = live[i];
      rec->finish_s = now();
      if (rec->first_token_s < 0) rec->first_token_s = rec->finish_s;
      rec->queue_s = res.timing.queue_seconds;
      rec->prompt_tokens = res.usage.prompt_tokens;
      rec->cached_tokens = res.usage.cached_tokens;
      rec->output_tokens = res.usage.completion_tokens;
      rec->recomputed_tokens = res.usage.recomputed_tokens;
      rec->preemptions = res.usage.preemptions;
      rec->error = res.finish == FinishReason::Error;
      run.records.push_back(*rec);
      lv.history.insert(lv.history.end(), res.tokens.begin(), res.tokens.end());
      lv.in_flight = false;
      // Resident KV of this session right after its turn.
      if (const Session* ses = sched->sessions().find(lv.conv->id); ses != nullptr && ses->cache) {
        const size_t t = std::min(static_cast<size_t>(rec->turn), kv_sum.size() - 1);
        kv_sum[t] += static_cast<double>(ses->cache->pages_held()) * page_bytes;
        ++kv_n[t];
      }
      ++lv.next_turn;
      if (lv.next_turn >= lv.conv->turns.size()) {
        lv.done = true;
        --active;
        sched->drop_session(lv.conv->id);  // a finished conversation leaves nothing behind
      } else {
        lv.ready_at = rec->finish_s + lv.conv->turns[lv.next_turn].think_time_s;
      }
      ++finished_turns;
      if (on_progress) on_progress(finished_turns, total_turns);
      (void)spec;
    };
    l.in_flight = true;
    auto id = sched->submit(std::move(r));
    if (!id) failure = id.error();
  };

  while (finished_turns < total_turns && failure.ok()) {
    const double t = now();
    // Start conversations.
    if (closed) {
      while (active < concurrency && next_to_start < live.size()) {
        Live& l = live[next_to_start++];
        l.started = true;
        l.ready_at = t;
        ++active;
      }
    } else {
      for (Live& l : live)
        if (!l.started && l.conv->arrival_s <= t) {
          l.started = true;
          l.ready_at = l.conv->arrival_s;
          ++active;
        }
    }
    // Submit turns that are due.
    double next_event = 1e300;
    for (size_t i = 0; i < live.size(); ++i) {
      Live& l = live[i];
      if (!l.started || l.done || l.in_flight) {
        if (!l.started && !closed) next_event = std::min(next_event, l.conv->arrival_s);
        continue;
      }
      if (l.ready_at <= t) submit_turn(i);
      else next_event = std::min(next_event, l.ready_at);
    }
    if (!failure.ok()) break;
    if (sched->idle()) {
      // Nothing to compute until the next arrival or think time ends.
      if (next_event < 1e299) {
        const double wait = std::max(0.0, next_event - now());
        std::this_thread::sleep_for(std::chrono::duration<double>(std::min(wait, 0.05)));
      }
      continue;
    }
    sched->step();
    const SchedulerStats st = sched->stats();
    const double used = static_cast<double>(st.pool.used_pages) * page_bytes;
    run.kv_used_bytes.add(now(), used);
    run.kv_wasted_slots.add(now(), static_cast<double>(st.pool.wasted_slots));
    run.running.add(now(), st.running);
    run.peak_running = std::max<int64_t>(run.peak_running, st.running);
    run.peak_kv_bytes = std::max(run.peak_kv_bytes, used);
    if (st.pool.allocated_slots > 0) {
      waste_sum += st.pool.waste_fraction();
      ++waste_n;
    }
  }
  TG_TRY(failure);
  run.wall_s = now();
  run.stats = sched->stats();
  run.attention_imbalance = model.attention_planner().imbalance();
  run.mean_waste_fraction = waste_n > 0 ? waste_sum / static_cast<double>(waste_n) : 0.0;
  for (size_t t = 0; t < kv_sum.size(); ++t)
    run.session_kv_bytes_by_turn.push_back(kv_n[t] > 0 ? kv_sum[t] / static_cast<double>(kv_n[t]) : 0.0);
  // KV bytes per cached token: the resident caches' bytes over the positions they cover, taken
  // at each turn's end (what a session costs to keep per token of its history).
  double bytes = 0, positions = 0;
  for (const RequestRecord& r : run.records) positions += static_cast<double>(r.prompt_tokens);
  for (size_t t = 0; t < kv_sum.size(); ++t) bytes += kv_sum[t];
  run.kv_bytes_per_cached_token = positions > 0 ? bytes / positions : 0.0;
  return run;
}

}  // namespace tangram
