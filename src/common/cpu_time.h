// CPU time of the whole process (all threads). Benchmarks report it beside wall time: on a
// machine shared with other jobs, wall time counts the time the scheduler gave to others, CPU
// time counts only the work done (and the spinning of threads waiting for each other).
#pragma once

#include <ctime>

namespace tangram {

// Seconds on `clock`, or a negative value where the clock cannot be read (a thread's clock
// after the thread has ended).
inline double clock_seconds(clockid_t clock) {
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return -1.0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

inline double process_cpu_seconds() { return clock_seconds(CLOCK_PROCESS_CPUTIME_ID); }

}  // namespace tangram
