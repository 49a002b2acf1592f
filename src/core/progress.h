#pragma once
// Progress bar with rate and ETA on stderr, redrawn at most a few times per second.
#include <chrono>
#include <cstddef>
#include <string>

namespace ts {

class Progress {
 public:
  Progress(std::string label, size_t total, bool enabled = true);
  ~Progress();
  // Sets the number of finished units and an optional status text (e.g. running PPL).
  void update(size_t done, const std::string& status = "");
  void finish();  // draws the final line; without it nothing more is drawn

 private:
  void draw(bool final_line);
  std::string label_, status_;
  size_t total_, done_ = 0;
  bool enabled_, finished_ = false, drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_, last_log_line_;
};

}  // namespace ts
