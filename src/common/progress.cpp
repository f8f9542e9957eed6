#include "common/progress.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace tangram {

ProgressBar::ProgressBar(std::string label, int64_t total)
    : label_(std::move(label)),
      total_(total > 0 ? total : 1),
      tty_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {
  draw(false);
}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(int64_t done) {
  done_ = done;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ > std::chrono::milliseconds(100)) {
    last_draw_ = now;
    draw(false);
  }
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  draw(true);
}

void ProgressBar::draw(bool final) {
  if (!tty_ && !final) return;
  const double frac = std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_));
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar;
  for (int i = 0; i < kWidth; ++i) bar += i < filled ? "█" : "░";
  std::string eta;
  if (!final && frac > 0.02) eta = fmt::format(", ~{:.0f}s left", elapsed / frac - elapsed);
  const std::string line = fmt::format("{} {} {:3.0f}% ({}/{}) {:.1f}s{}", label_, bar,
                                       frac * 100.0, done_, total_, elapsed, eta);
  if (tty_)
    std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), final ? "\n" : "");
  else
    std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace tangram
