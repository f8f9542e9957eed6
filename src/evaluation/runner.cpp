#include "evaluation/runner.h"

#include <algorithm>
#include <chrono>

namespace tangram {

namespace {

using Clock = std::chrono::steady_clock;

// One conversation in flight.
struct Live {
  const Conversation* conv = nullptr;
  size_t next_turn = 0;          // turn to submit next
  std::vector<int32_t> history;  // every token so far (prompts and answers)
  double ready_at = 0;           // when the next turn may be submitted
  bool in_flight = false;
  bool started = false;
  bool done = false;
};

// Drives one workload through a scheduler: starts conversations (closed or open loop), submits
// each turn when it is due, records every request and samples the KV pool after every step.
class WorkloadDriver {
 public:
  WorkloadDriver(Scheduler& sched, const std::vector<Conversation>& conversations,
                 const WorkloadSpec& spec, const std::function<void(int64_t, int64_t)>& on_progress)
      : sched_(sched),
        spec_(spec),
        on_progress_(on_progress),
        live_(conversations.size()),
        page_bytes_(static_cast<double>(sched.pool().page_bytes())),
        kv_sum_(spec.turns > 0 ? static_cast<size_t>(spec.turns) : 1, 0.0),
        kv_n_(kv_sum_.size(), 0),
        t0_(Clock::now()) {
    for (size_t i = 0; i < conversations.size(); ++i) {
      live_[i].conv = &conversations[i];
      total_turns_ += static_cast<int64_t>(conversations[i].turns.size());
    }
  }

  Status run() {
    while (finished_turns_ < total_turns_ && failure_.ok()) {
      const double t = now();
      start_conversations(t);
      const double next_event = submit_due_turns(t);
      if (!failure_.ok()) break;
      if (sched_.idle()) {
        // Nothing to compute until the next arrival or think time ends: the clock jumps there
        // (nothing is queued or running, so no request's times straddle the jump).
        if (next_event < kNever) skipped_s_ += std::max(0.0, next_event - now());
        continue;
      }
      const Clock::time_point step_start = Clock::now();
      sched_.step();
      busy_s_ += std::chrono::duration<double>(Clock::now() - step_start).count();
      sample_pool();
    }
    return failure_;
  }

  // The run's summary once run() succeeded; `attention_imbalance` is the caller's to fill.
  WorkloadRun finish() {
    run_.wall_s = now();
    run_.busy_s = busy_s_;
    run_.idle_skipped_s = skipped_s_;
    run_.stats = sched_.stats();
    run_.mean_waste_fraction = waste_n_ > 0 ? waste_sum_ / static_cast<double>(waste_n_) : 0.0;
    for (size_t t = 0; t < kv_sum_.size(); ++t)
      run_.session_kv_bytes_by_turn.push_back(
          kv_n_[t] > 0 ? kv_sum_[t] / static_cast<double>(kv_n_[t]) : 0.0);
    // KV bytes per cached token: the resident caches' bytes over the positions they cover, taken
    // at each turn's end (what a session costs to keep per token of its history).
    double bytes = 0, positions = 0;
    for (const RequestRecord& r : run_.records) positions += static_cast<double>(r.prompt_tokens);
    for (double b : kv_sum_) bytes += b;
    run_.kv_bytes_per_cached_token = positions > 0 ? bytes / positions : 0.0;
    return std::move(run_);
  }

 private:
  static constexpr double kNever = 1e300;

  // The run's clock: wall time since the start plus the idle gaps skipped.
  double now() const {
    return std::chrono::duration<double>(Clock::now() - t0_).count() + skipped_s_;
  }

  // Closed loop: conversations start in order, `concurrency` at a time; open loop: at arrival.
  void start_conversations(double t) {
    if (spec_.arrival == WorkloadSpec::Arrival::ClosedLoop) {
      while (active_ < std::max(1, spec_.concurrency) && next_to_start_ < live_.size()) {
        Live& l = live_[next_to_start_++];
        l.started = true;
        l.ready_at = t;
        ++active_;
      }
      return;
    }
    for (Live& l : live_)
      if (!l.started && l.conv->arrival_s <= t) {
        l.started = true;
        l.ready_at = l.conv->arrival_s;
        ++active_;
      }
  }

  // Submits every turn that is due; returns when the next one (or arrival) will be.
  double submit_due_turns(double t) {
    const bool closed = spec_.arrival == WorkloadSpec::Arrival::ClosedLoop;
    double next_event = kNever;
    for (size_t i = 0; i < live_.size() && failure_.ok(); ++i) {
      Live& l = live_[i];
      if (!l.started || l.done || l.in_flight) {
        if (!l.started && !closed) next_event = std::min(next_event, l.conv->arrival_s);
        continue;
      }
      if (l.ready_at <= t)
        submit_turn(i);
      else
        next_event = std::min(next_event, l.ready_at);
    }
    return next_event;
  }

  void submit_turn(size_t i) {
    Live& l = live_[i];
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
    r.on_token = [rec, this](const TokenEvent&) {
      if (rec->first_token_s < 0) rec->first_token_s = now();
    };
    r.on_finish = [rec, i, this](const RequestResult& res) { turn_finished(i, *rec, res); };
    l.in_flight = true;
    auto id = sched_.submit(std::move(r));
    if (!id) failure_ = id.error();
  }

  void turn_finished(size_t i, RequestRecord rec, const RequestResult& res) {
    Live& lv = live_[i];
    rec.finish_s = now();
    if (rec.first_token_s < 0) rec.first_token_s = rec.finish_s;
    rec.queue_s = res.timing.queue_seconds;
    rec.prompt_tokens = res.usage.prompt_tokens;
    rec.cached_tokens = res.usage.cached_tokens;
    rec.output_tokens = res.usage.completion_tokens;
    rec.recomputed_tokens = res.usage.recomputed_tokens;
    rec.restored_tokens = res.usage.restored_tokens;
    rec.preemptions = res.usage.preemptions;
    rec.error = res.finish == FinishReason::Error;
    run_.records.push_back(rec);
    lv.history.insert(lv.history.end(), res.tokens.begin(), res.tokens.end());
    lv.in_flight = false;
    // Resident KV of this session right after its turn.
    if (const Session* ses = sched_.sessions().find(lv.conv->id); ses != nullptr && ses->cache) {
      const size_t t = std::min(static_cast<size_t>(rec.turn), kv_sum_.size() - 1);
      kv_sum_[t] += static_cast<double>(ses->cache->pages_held()) * page_bytes_;
      ++kv_n_[t];
    }
    ++lv.next_turn;
    if (lv.next_turn >= lv.conv->turns.size()) {
      lv.done = true;
      --active_;
      sched_.drop_session(lv.conv->id);  // a finished conversation leaves nothing behind
    } else {
      lv.ready_at = rec.finish_s + lv.conv->turns[lv.next_turn].think_time_s;
    }
    ++finished_turns_;
    if (on_progress_) on_progress_(finished_turns_, total_turns_);
  }

  void sample_pool() {
    const SchedulerStats st = sched_.stats();
    const double t = now();
    const double used = static_cast<double>(st.pool.used_pages) * page_bytes_;
    run_.kv_used_bytes.add(t, used);
    run_.kv_wasted_slots.add(t, static_cast<double>(st.pool.wasted_slots));
    run_.running.add(t, st.running);
    run_.peak_running = std::max<int64_t>(run_.peak_running, st.running);
    run_.peak_kv_bytes = std::max(run_.peak_kv_bytes, used);
    if (st.pool.allocated_slots > 0) {
      waste_sum_ += st.pool.waste_fraction();
      ++waste_n_;
    }
  }

  Scheduler& sched_;
  const WorkloadSpec& spec_;
  const std::function<void(int64_t, int64_t)>& on_progress_;
  std::vector<Live> live_;
  const double page_bytes_;
  std::vector<double> kv_sum_;  // [turn] resident session KV bytes summed at each turn's end
  std::vector<int64_t> kv_n_;   // [turn] how many sessions were summed
  const Clock::time_point t0_;
  WorkloadRun run_;
  Status failure_ = Status::Ok();
  int64_t total_turns_ = 0;
  int64_t finished_turns_ = 0;
  size_t next_to_start_ = 0;
  int active_ = 0;
  double waste_sum_ = 0;
  int64_t waste_n_ = 0;
  double skipped_s_ = 0;  // idle time the clock jumped over
  double busy_s_ = 0;     // wall time inside scheduler steps
};

}  // namespace

Result<WorkloadRun> run_workload(Model& model, const Tokenizer& tokenizer, ThreadPool& pool,
                                 const SchedulerOptions& options,
                                 const std::vector<Conversation>& conversations,
                                 const WorkloadSpec& spec,
                                 const std::function<void(int64_t, int64_t)>& on_progress,
                                 const SessionKeeperOptions& sessions) {
  TG_ASSIGN(std::unique_ptr<Scheduler> sched,
            Scheduler::create(model, tokenizer, pool, options, sessions));
  model.attention_planner().reset_stats();
  WorkloadDriver driver(*sched, conversations, spec, on_progress);
  TG_TRY(driver.run());
  WorkloadRun run = driver.finish();
  run.attention_imbalance = model.attention_planner().imbalance();
  return run;
}

}  // namespace tangram
