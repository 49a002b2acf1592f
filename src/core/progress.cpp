#include "core/progress.h"

#include <unistd.h>

#include <cstdio>

namespace ts {

Progress::Progress(std::string label, size_t total, bool enabled)
    : label_(std::move(label)), total_(total), enabled_(enabled) {
  start_ = last_draw_ = last_log_line_ = std::chrono::steady_clock::now();
}

// Destroyed without finish() (an error is unwinding): end a half-drawn terminal line and print
// nothing else, so the error stays the only line on stderr.
Progress::~Progress() {
  if (!finished_ && drawn_ && isatty(STDERR_FILENO)) std::fputs("\n", stderr);
}

void Progress::update(size_t done, const std::string& status) {
  done_ = done;
  status_ = status;
  auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(200) && done_ < total_) return;
  last_draw_ = now;
  draw(false);
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  draw(true);
}

void Progress::draw(bool final_line) {
  if (!enabled_) return;
  drawn_ = true;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double frac = total_ ? static_cast<double>(done_) / static_cast<double>(total_) : 1.0;
  const double eta = done_ ? elapsed * (1.0 - frac) / frac : 0.0;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  // A terminal gets one redrawn line; a log file gets a whole line every 30 s and at the end.
  const bool tty = isatty(STDERR_FILENO);
  if (!tty && !final_line) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_log_line_ < std::chrono::seconds(30)) return;
    last_log_line_ = now;
  }
  std::fprintf(stderr, "%s%s [%s] %zu/%zu %.0fs elapsed, ETA %.0fs %s%s", tty ? "\r\033[K" : "",
               label_.c_str(), bar.c_str(), done_, total_, elapsed, eta, status_.c_str(),
               final_line || !tty ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace ts
