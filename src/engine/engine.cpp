#include "engine/engine.h"

#include <future>

namespace tangram {

Result<std::unique_ptr<Engine>> Engine::create(Model& model, const Tokenizer& tokenizer,
                                               const EngineOptions& options) {
  std::unique_ptr<Engine> e(new Engine(options.threads));
  TG_ASSIGN(e->scheduler_,
            Scheduler::create(model, tokenizer, e->pool_, options.scheduler, options.sessions));
  e->stats_ = e->scheduler_->stats();
  e->worker_ = std::thread([raw = e.get()] { raw->loop(); });
  return e;
}

Engine::~Engine() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

Result<RequestId> Engine::submit(Request request) {
  TG_TRY(scheduler_->validate(request));  // reads only state fixed at creation
  RequestId id = 0;
  {
    // The id is taken under the lock that queues it, so ids follow the inbox's order (which
    // drop_session_later relies on).
    std::lock_guard lock(mu_);
    if (stop_) return make_error("the engine is shutting down");
    id = next_id_.fetch_add(1);
    inbox_.emplace_back(id, std::move(request));
    idle_now_ = false;
  }
  wake_.notify_all();
  return id;
}

Result<std::vector<RequestId>> Engine::submit_batch(std::vector<Request> requests) {
  for (const Request& r : requests) TG_TRY(scheduler_->validate(r));
  std::vector<RequestId> ids;
  {
    std::lock_guard lock(mu_);
    if (stop_) return make_error("the engine is shutting down");
    for (Request& r : requests) {
      ids.push_back(next_id_.fetch_add(1));
      inbox_.emplace_back(ids.back(), std::move(r));
    }
    idle_now_ = requests.empty() && idle_now_;
  }
  wake_.notify_all();
  return ids;
}

void Engine::cancel(RequestId id) {
  {
    std::lock_guard lock(mu_);
    cancels_.push_back(id);
  }
  wake_.notify_all();
}

Result<RequestResult> Engine::generate(Request request) {
  if (request.n != 1)
    return make_error(
        "generate() returns one result: submit a request of n = {} choices with an on_finish",
        request.n);
  auto done = std::make_shared<std::promise<RequestResult>>();
  std::future<RequestResult> result = done->get_future();
  auto user_finish = std::move(request.on_finish);
  request.on_finish = [done, user_finish](const RequestResult& r) {
    if (user_finish) user_finish(r);
    done->set_value(r);
  };
  TG_TRY(submit(std::move(request)));
  return result.get();
}

SchedulerStats Engine::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Engine::wait_idle() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [&] { return idle_now_ || stop_; });
}

void Engine::evict_idle_sessions() {
  run_on_worker([](Scheduler& s) { s.sessions().evict_idle(); });
}

bool Engine::drop_session(const std::string& id) {
  bool dropped = false;
  const RequestId before = next_id_.load();
  run_on_worker([&](Scheduler& s) { dropped = s.drop_session(id, before); });
  return dropped;
}

void Engine::drop_session_later(const std::string& id) {
  std::lock_guard lock(mu_);
  if (stop_) return;
  // Ids are handed out in submission order, so this bound tells the requests submitted before
  // this call from later ones.
  tasks_.push_back([id, before = next_id_.load()](Scheduler& s) { s.drop_session(id, before); });
  ++tasks_queued_;
  wake_.notify_all();
}

void Engine::wait_tasks() {
  std::unique_lock lock(mu_);
  const uint64_t target = tasks_queued_;
  tasks_ran_.wait(lock, [&] { return tasks_done_ >= target || stop_; });
}

bool Engine::run_on_worker(std::function<void(Scheduler&)> task) {
  std::unique_lock lock(mu_);
  if (stop_) return false;
  tasks_.push_back(std::move(task));
  const uint64_t target = ++tasks_queued_;
  wake_.notify_all();
  tasks_ran_.wait(lock, [&] { return tasks_done_ >= target || stop_; });
  return tasks_done_ >= target;
}

void Engine::loop() {
  std::vector<std::pair<RequestId, Request>> inbox;
  std::vector<RequestId> cancels;
  for (;;) {
    std::vector<std::function<void(Scheduler&)>> tasks;
    bool stopping = false;
    {
      std::unique_lock lock(mu_);
      auto ready = [&] {
        return stop_ || !inbox_.empty() || !cancels_.empty() || !tasks_.empty() ||
               !scheduler_->idle();
      };
      // With tiers, wake up now and then to move idle sessions down a tier and refresh stats_.
      if (const auto period = scheduler_->sessions().housekeeping_period())
        wake_.wait_for(lock, *period, ready);
      else
        wake_.wait(lock, ready);
      inbox.swap(inbox_);
      cancels.swap(cancels_);
      tasks.swap(tasks_);
      stopping = stop_;
    }
    for (auto& [id, req] : inbox) {
      if (req.on_finish)
        req.on_finish = [this, user = std::move(req.on_finish)](const RequestResult& r) {
          finished_.emplace_back(user, r);
        };
      Request keep_callbacks = req;  // submit_with_id consumes the request even on error
      if (Status st = scheduler_->submit_with_id(id, std::move(req)); !st.ok()) {
        // Checked in submit(); reaching here means a duplicate id, which cannot happen.
        RequestResult r;
        r.id = id;
        r.finish = FinishReason::Error;
        r.error = st.message();
        if (keep_callbacks.on_finish) keep_callbacks.on_finish(r);
      }
    }
    inbox.clear();
    for (RequestId id : cancels) scheduler_->cancel(id);
    cancels.clear();
    if (!finished_.empty()) publish_and_deliver();  // cancelled requests hear of it before the step
    for (auto& task : tasks) task(*scheduler_);
    const bool offloaded = scheduler_->sessions().offload_idle() > 0;
    if (!tasks.empty() || offloaded) {
      std::lock_guard lock(mu_);
      tasks_done_ += tasks.size();
      stats_ = scheduler_->stats();
      tasks_ran_.notify_all();
    }
    tasks.clear();
    if (stopping) {
      // Every request still pending gets its on_finish (Cancelled) before the engine goes.
      scheduler_->cancel_all();
      publish_and_deliver();
      std::lock_guard lock(mu_);
      tasks_ran_.notify_all();  // queued tasks are dropped: their callers see stop_
      idle_now_ = true;
      idle_.notify_all();
      return;
    }
    if (!scheduler_->idle()) scheduler_->step();
    publish_and_deliver();
    std::lock_guard lock(mu_);
    idle_now_ = scheduler_->idle() && inbox_.empty();
    if (idle_now_) idle_.notify_all();
  }
}

void Engine::publish_and_deliver() {
  {
    std::lock_guard lock(mu_);
    stats_ = scheduler_->stats();
  }
  std::vector<std::pair<std::function<void(const RequestResult&)>, RequestResult>> done;
  done.swap(finished_);
  for (auto& [callback, result] : done) callback(result);
}

}  // namespace tangram
