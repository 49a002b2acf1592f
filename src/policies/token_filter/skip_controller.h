#pragma once
// The online threshold of Token Filtering (paper 003, Sec. 3.3, Eq. 4): a layer skips a token when
// its similarity score exceeds the layer's threshold T, and T follows the skip rate observed so
// far, S, towards the target P by proportional feedback before each decision:
//   Eq. 4        T <- T + lr * (S - P)   skips too few: T drops (stable)
//   Algorithm 1  T <- T + lr * (P - S)   the printed sign: positive feedback, runs to 0% or 100%
#include <cstdint>

namespace ts {

struct SkipCount {
  uint64_t decided = 0, skipped = 0;
  double rate() const { return decided ? static_cast<double>(skipped) / static_cast<double>(decided) : 0.0; }
  void add(bool skip) {
    ++decided;
    skipped += skip ? 1 : 0;
  }
  SkipCount& operator+=(const SkipCount& o) {
    decided += o.decided;
    skipped += o.skipped;
    return *this;
  }
};

struct ControllerParams {
  double target = 0.5;  // P
  double lr = 0.01;
  double initial_threshold = 0.5;
  bool printed_sign = false;  // Algorithm 1's sign instead of Eq. 4's
};

// Moves `threshold` by the error of the observed skip rate (no move before the first decision),
// then decides whether `score` skips. The caller adds the decision to the counts it observes.
// A target of 0 never skips and a target of 1 always skips.
bool controlled_skip(const ControllerParams& p, double& threshold, const SkipCount& observed, float score);

}  // namespace ts
