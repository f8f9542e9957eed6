// CPU time of the whole process (all threads). Benchmarks report it beside wall time: on a
// machine shared with other jobs, wall time counts the time the scheduler gave to others, CPU
// time counts only the work done (and the spinning of threads waiting for each other).
#pragma once

#include <ctime>

namespace tangram {

inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace tangram
