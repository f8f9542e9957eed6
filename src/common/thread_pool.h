// One persistent pool of worker threads for all compute. The calling thread takes part as
// worker 0, so a pool of n threads starts n-1 OS threads. Workers spin briefly (50 us) between jobs
// (decode issues hundreds of small jobs per token) and then sleep on an atomic wait.
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

namespace tangram {

class ThreadPool {
 public:
  // n_threads <= 0 means one per hardware thread.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(thread_index, n_threads) once on every thread and returns when all are done.
  // Not reentrant: fn must not call back into the same pool.
  void run(const std::function<void(int, int)>& fn);

  // Splits [0, n) into contiguous chunks, at most one per thread, each a multiple of `grain`
  // (except the last), and calls fn(begin, end, thread_index).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn,
                    int64_t grain = 1);

  // The chunk [begin, end) of [0, n) that parallel_for gives thread `tid` of `n_threads` at
  // this grain (empty when that thread gets none). Code that splits several ranges inside one
  // run() uses it to split each the same way.
  static std::pair<int64_t, int64_t> chunk(int64_t n, int64_t grain, int tid, int n_threads);

  // CPU time of the calling thread plus every worker thread, in seconds, each thread's own
  // clock read exactly. The calling thread stands for worker 0, so call it from the thread
  // that calls run(); from any other the figure counts that thread instead.
  // CLOCK_PROCESS_CPUTIME_ID adds another thread's running time only when the scheduler ticks
  // (every 4 ms at HZ=250), so its difference over a few milliseconds (one layer's attention)
  // could be off by a tick; differences of this one are not. Falls back to the process clock
  // where a worker's clock could not be had or read.
  double cpu_seconds() const;

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::vector<clockid_t> worker_clocks_;  // [n_threads - 1], empty when one could not be had
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace tangram
