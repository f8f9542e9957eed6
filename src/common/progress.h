// A terminal progress bar for long work (model generation, benchmarks). Draws on stderr only
// when it is a terminal, so logs and pipes stay clean; otherwise prints nothing until done().
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tangram {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total);
  ~ProgressBar();
  // Sets the completed count and redraws (at most ~10 times a second).
  void update(int64_t done);
  void add(int64_t n = 1) { update(done_ + n); }
  // Final draw and newline.
  void finish();

 private:
  void draw(bool final);
  std::string label_;
  int64_t total_;
  int64_t done_ = 0;
  bool tty_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace tangram
