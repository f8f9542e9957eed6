#include "common/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>

#include "common/cpu_time.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define TG_CPU_RELAX() _mm_pause()
#else
#define TG_CPU_RELAX() ((void)0)
#endif

namespace tangram {

namespace {

// How long a thread spins at a hand-off before it sleeps on the atomic: long enough to bridge
// the gaps between the kernels of one decode step on an idle machine, short enough that a
// thread waiting on a descheduled partner (a loaded machine) or on serial work gives its core
// back soon (measured in the 16 x 8K KV-bound step, 2 threads, loaded machine: 50 us gave the
// lowest step CPU and wall of 20, 50, 200 and 500). PAUSE takes from about 10 to 140 cycles
// depending on the core (25 ns on the Zen 4 this was measured on, where the 20,000 iterations
// once used here spun for 0.5 ms), so the budget is timed rather than counted.
constexpr auto kSpinBudget = std::chrono::microseconds(50);

// Spins until ready() holds or the budget is spent; returns ready().
template <typename Ready>
bool spin_until(Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinBudget;
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      if (ready()) return true;
      TG_CPU_RELAX();
    }
    if (std::chrono::steady_clock::now() >= deadline) return ready();
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0)
    n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  worker_clocks_.reserve(
      static_cast<size_t>(n_threads_ - 1));  // no allocation may throw past the threads' start
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
  for (auto& t : workers_) {
    clockid_t clock{};
    if (pthread_getcpuclockid(t.native_handle(), &clock) != 0) {
      worker_clocks_.clear();
      break;
    }
    worker_clocks_.push_back(clock);
  }
}

double ThreadPool::cpu_seconds() const {
  if (worker_clocks_.size() != workers_.size()) return process_cpu_seconds();
  double total = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
  for (const clockid_t clock : worker_clocks_) {
    const double s = clock_seconds(clock);
    if (s < 0) return process_cpu_seconds();  // a clock that cannot be read: the coarse one
    total += s;
  }
  return total;
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = seen;
    spin_until([&] { return (gen = generation_.load(std::memory_order_acquire)) != seen; });
    if (gen == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    (*job_)(index, n_threads_);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  fn(0, n_threads_);
  spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; });
  for (int p = pending_.load(std::memory_order_acquire); p != 0;
       p = pending_.load(std::memory_order_acquire))
    pending_.wait(p, std::memory_order_acquire);
  job_ = nullptr;
}

std::pair<int64_t, int64_t> ThreadPool::chunk(int64_t n, int64_t grain, int tid, int n_threads) {
  grain = std::max<int64_t>(1, grain);
  const int64_t n_grains = (n + grain - 1) / grain;
  const int64_t per = (n_grains + n_threads - 1) / n_threads;
  return {std::min(n, tid * per * grain), std::min(n, (tid + 1) * per * grain)};
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn,
                              int64_t grain) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n <= std::max<int64_t>(1, grain)) {
    fn(0, n, 0);
    return;
  }
  run([&](int tid, int n_threads) {
    const auto [begin, end] = chunk(n, grain, tid, n_threads);
    if (begin < end) fn(begin, end, tid);
  });
}

}  // namespace tangram
