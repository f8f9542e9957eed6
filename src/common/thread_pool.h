// One persistent pool of worker threads for all compute. The calling thread takes part as
// worker 0, so a pool of n threads starts n-1 OS threads. Workers spin briefly (50 us) between jobs
// (decode issues hundreds of small jobs per token) and then sleep on an atomic wait.
#pragma once

#include <atomic>
#include <cstdint>
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

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace tangram
