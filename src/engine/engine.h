// The serving engine: a Scheduler driven by its own worker thread, with a thread-safe front.
//
// Any thread may submit() requests, cancel() them or read stats(); the worker thread drains
// the inbox, runs scheduler steps while there is work, and sleeps when there is none.
// Request callbacks (on_token, on_finish) run on the worker thread. generate() is the blocking
// convenience: submit and wait for the result.
//
//   Engine engine = *Engine::create(model, tokenizer, options);
//   Request r; r.prompt = tokens; r.params.max_tokens = 64; r.session_id = "chat-1";
//   r.on_token = [](const TokenEvent& e) { fputs(std::string(e.text).c_str(), stdout); };
//   RequestResult done = *engine.generate(std::move(r));
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/result.h"
#include "common/thread_pool.h"
#include "model/model.h"
#include "scheduler/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace tangram {

struct EngineOptions {
  int threads = 0;  // compute threads (0: one per core)
  SchedulerOptions scheduler;
  SessionKeeperOptions sessions;  // sessions between turns and their tiers (host, disk, Redis)
};

class Engine {
 public:
  // model and tokenizer must outlive the engine.
  static Result<std::unique_ptr<Engine>> create(Model& model, const Tokenizer& tokenizer,
                                                const EngineOptions& options);
  // Cancels what is still pending (each gets its on_finish) and joins the worker.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates (errors come back here, nothing is queued) and queues the request.
  Result<RequestId> submit(Request request);
  // Queues several requests at once: the worker sees all of them in the same step (e.g. a
  // benchmark's concurrent clients). All are validated first; on an error none is queued.
  Result<std::vector<RequestId>> submit_batch(std::vector<Request> requests);
  // Asks the worker to cancel a request; it finishes with FinishReason::Cancelled unless it
  // finished first. Unknown ids are ignored.
  void cancel(RequestId id);
  // submit() and wait for the result; the request's own callbacks still run. One choice only
  // (request.n = 1; with more, submit() and collect the n on_finish calls).
  Result<RequestResult> generate(Request request);

  // A snapshot taken after the latest step (a request's on_finish runs inside its step, so the
  // snapshot may not count it yet; wait_idle() first for exact figures).
  SchedulerStats stats() const;
  // Blocks until every submitted request has finished and the snapshot is up to date.
  void wait_idle();
  // Frees idle session caches (runs on the worker; returns once done).
  void evict_idle_sessions();
  // Runs `task` on the worker thread between two steps, with exclusive use of the scheduler,
  // and returns once it has run (or at once, without running it, if the engine is stopping).
  // For admin work the scheduler is not thread-safe for: dropping a session, inspecting one.
  // Returns false if the task did not run.
  bool run_on_worker(std::function<void(Scheduler&)> task);
  // Drops a session for good (Scheduler::drop_session): the requests of it submitted so far are
  // cancelled, its pages freed, its tier copies erased; returns once done. False if unknown.
  bool drop_session(const std::string& id);
  // The same, queued without waiting (any thread, also the worker's own callbacks, and under
  // locks the worker may need). It cancels the session's requests submitted before this call
  // only: a request submitted after it (a new conversation under the same id) is left alone.
  void drop_session_later(const std::string& id);
  // Returns once every task queued before this call (run_on_worker, drop_session_later) has run.
  void wait_tasks();
  // Tasks queued so far (tests: to know that another thread's task is queued).
  uint64_t tasks_queued() const {
    std::lock_guard lock(mu_);
    return tasks_queued_;
  }
  // Waits (bounded) until a finished turn's session is written through to disk and Redis (see
  // SessionTiers); true when it is or there is nothing to write. Any thread; never the worker's.
  bool wait_session_written(const std::string& id, std::chrono::milliseconds timeout) const {
    return scheduler_->sessions().wait_written(id, timeout);
  }
  const SchedulerOptions& options() const { return scheduler_->options(); }
  int threads() const { return pool_.size(); }
  int64_t context() const { return scheduler_->context(); }   // tokens a sequence may hold
  const Model& model() const { return scheduler_->model(); }  // read-only: its file and config

 private:
  Engine(int threads) : pool_(threads) {}
  void loop();
  // Refreshes the stats snapshot, then runs the on_finish callbacks the scheduler produced since
  // the last call. In that order, so anything a client reads after its answer (the metrics'
  // running count, the pool's pages) already counts that request as finished.
  void publish_and_deliver();

  // on_finish callbacks held back by the worker until the snapshot includes them (worker only).
  std::vector<std::pair<std::function<void(const RequestResult&)>, RequestResult>> finished_;

  ThreadPool pool_;
  std::unique_ptr<Scheduler> scheduler_;
  std::thread worker_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<std::pair<RequestId, Request>> inbox_;
  std::vector<RequestId> cancels_;
  std::vector<std::function<void(Scheduler&)>> tasks_;
  uint64_t tasks_queued_ = 0;
  uint64_t tasks_done_ = 0;
  std::condition_variable tasks_ran_;
  std::condition_variable idle_;
  bool idle_now_ = true;  // inbox empty, scheduler idle, snapshot current
  bool stop_ = false;
  SchedulerStats stats_;
  std::atomic<RequestId> next_id_{1};
};

}  // namespace tangram
