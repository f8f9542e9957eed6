#include "benchmark/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

namespace tangram::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr auto kPoll = std::chrono::milliseconds(20);

ChildExit from_status(int status) {
  ChildExit e;
  e.signaled = WIFSIGNALED(status);
  e.code = e.signaled ? WTERMSIG(status) : WEXITSTATUS(status);
  return e;
}

int64_t file_size(const std::string& path) {
  std::error_code ec;
  const auto n = fs::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(n);
}

std::string read_from(const std::string& path, int64_t offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(offset);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The port of cmd_serve's "listening on http://HOST:PORT" line in `log`, or 0 before it is there.
int listening_port(const std::string& log) {
  const std::string_view key = "listening on http://";
  const size_t at = log.find(key);
  if (at == std::string::npos) return 0;
  const size_t nl = log.find('\n', at);
  if (nl == std::string::npos) return 0;  // the line is still being written
  const size_t colon = log.rfind(':', nl);
  if (colon == std::string::npos || colon < at + key.size()) return 0;
  return std::atoi(log.substr(colon + 1, nl - colon - 1).c_str());
}

// In the child, between fork and exec: async-signal-safe calls only.
[[noreturn]] void exec_child(int log_fd, int null_fd, pid_t parent, char* const argv[]) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the soak's thread is gone: so is its server
  if (::getppid() != parent) ::_exit(127);
  ::dup2(null_fd, 0);
  ::dup2(log_fd, 1);
  ::dup2(log_fd, 2);
  // Client sockets of the soak must not live on in the server: a client that closes its end
  // would otherwise never be seen to leave.
  if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0)
    for (int fd = 3; fd < 4096; ++fd) ::close(fd);
  ::execv(argv[0], argv);
  ::_exit(127);
}

}  // namespace

std::string ChildExit::describe() const {
  return signaled ? fmt::format("signal {} ({})", code, ::strsignal(code))
                  : fmt::format("exit {}", code);
}

Result<std::unique_ptr<ServerProcess>> ServerProcess::start(std::vector<std::string> args,
                                                            std::string log_path,
                                                            double startup_s) {
  auto p = std::unique_ptr<ServerProcess>(new ServerProcess(std::move(args), std::move(log_path)));
  if (Status st = p->spawn(startup_s); !st) return Error{st.message()};
  return p;
}

ServerProcess::~ServerProcess() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

Status ServerProcess::spawn(double startup_s) {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return make_error("cannot find this binary (/proc/self/exe): {}", ec.message());
  std::vector<std::string> words = {exe.string(), "serve"};
  words.insert(words.end(), args_.begin(), args_.end());
  for (const std::string& w :
       {std::string("--host"), std::string("127.0.0.1"), std::string("--port")})
    words.push_back(w);
  words.push_back(std::to_string(port_));
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);

  const int64_t offset =
      file_size(log_path_);  // the log is shared by every start: read only this one's
  const int log_fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (log_fd < 0 || null_fd < 0)
    return make_error("cannot open the server log {}: {}", log_path_, std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) exec_child(log_fd, null_fd, parent, argv.data());
  ::close(log_fd);
  ::close(null_fd);
  if (pid < 0) return make_error("fork: {}", std::strerror(errno));
  pid_ = pid;

  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(startup_s));
  for (;;) {
    if (const int port = listening_port(read_from(log_path_, offset)); port > 0) {
      port_ = port;
      return Status::Ok();
    }
    if (auto e = exited())
      return make_error("`tangram serve` ended before listening ({}):\n{}", e->describe(),
                        log_tail(2000));
    if (Clock::now() > deadline) {
      bool hung = false;
      stop(SIGKILL, 5, hung);
      return make_error("`tangram serve` did not listen within {:.0f} s:\n{}", startup_s,
                        log_tail(2000));
    }
    std::this_thread::sleep_for(kPoll);
  }
}

ChildExit ServerProcess::stop(int sig, double stop_s, bool& hung) {
  hung = false;
  if (pid_ <= 0) return {};
  ::kill(pid_, sig);
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(stop_s));
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline && !hung) {
      hung = true;
      ::kill(pid_, SIGKILL);
    }
    std::this_thread::sleep_for(kPoll);
  }
  pid_ = -1;
  return from_status(status);
}

Status ServerProcess::restart(double startup_s) { return spawn(startup_s); }

std::optional<ChildExit> ServerProcess::exited() {
  if (pid_ <= 0) return std::nullopt;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return std::nullopt;
  pid_ = -1;
  return from_status(status);
}

int64_t ServerProcess::rss_bytes() const {
  if (pid_ <= 0) return 0;
  std::ifstream in(fmt::format("/proc/{}/status", pid_));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::atoll(line.c_str() + 6) * 1024;  // "VmRSS:  1234 kB"
  return 0;
}

std::string ServerProcess::log_tail(size_t bytes) const {
  const int64_t size = file_size(log_path_);
  return read_from(log_path_, std::max<int64_t>(0, size - static_cast<int64_t>(bytes)));
}

}  // namespace tangram::bench
