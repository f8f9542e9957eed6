// A `tangram serve` child process for the soak benchmark: this same binary, started on
// 127.0.0.1, stopped with the signal the soak chooses (SIGTERM, or SIGKILL), and started again on
// the same port so clients carry on. Its stdout and stderr are appended to one log file, which
// is also how its start is seen ("listening on http://HOST:PORT", cmd_serve.cpp).
//
// Start, stop and restart are meant for one thread (the soak's control loop): the child is made
// to die with the thread that forked it (PR_SET_PDEATHSIG), so an interrupted soak leaves no
// server behind, and that thread must outlive the child.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace tangram::bench {

// How a child ended, as waitpid tells it.
struct ChildExit {
  bool signaled = false;  // killed by a signal (code = its number), else exited (code = status)
  int code = 0;
  std::string describe() const;  // "exit 0", "signal 9 (Killed)"
};

class ServerProcess {
 public:
  // Starts `<this binary> serve ARGS --host 127.0.0.1 --port PORT` (port 0: a free one, kept for
  // restarts) and waits up to startup_s for it to listen. Errors: it exited or did not listen
  // in time (the log's tail is in the message).
  static Result<std::unique_ptr<ServerProcess>> start(std::vector<std::string> args,
                                                      std::string log_path, double startup_s);
  ~ServerProcess();  // SIGKILL and reap, if still running

  // Sends `sig` and reaps the child (SIGKILL after stop_s if it is still there; then
  // `hung` is set). Returns how it ended.
  ChildExit stop(int sig, double stop_s, bool& hung);
  // Starts it again on the same port.
  Status restart(double startup_s);
  // The child's end, if it has ended on its own (not reaped again later).
  std::optional<ChildExit> exited();

  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  // VmRSS of /proc/<pid>/status in bytes; 0 when unreadable (the child is gone).
  int64_t rss_bytes() const;
  // The last `bytes` of the log, for error messages.
  std::string log_tail(size_t bytes) const;

 private:
  ServerProcess(std::vector<std::string> args, std::string log_path)
      : args_(std::move(args)), log_path_(std::move(log_path)) {}
  Status spawn(double startup_s);

  std::vector<std::string> args_;
  std::string log_path_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace tangram::bench
