#pragma once
// lm-evaluation-harness's multiple-choice metrics: acc (argmax of the summed log-likelihoods),
// acc_norm (argmax of log-likelihood / choice length) and the standard error of the mean of acc.
#include <cstddef>
#include <vector>

#include "eval/mc_tasks.h"

namespace ts {

struct McOutcome {
  bool correct = false, correct_norm = false;
};

// Ties go to the first choice, as np.argmax.
McOutcome judge(const McExample& ex, const std::vector<double>& loglikelihoods);

struct McMetrics {
  double acc = 0, acc_norm = 0, acc_stderr = 0;  // stderr is 0 below two examples
  size_t n = 0;
};

class McAccumulator {
 public:
  void add(const McOutcome& o);
  McMetrics metrics() const;

 private:
  size_t n_ = 0, correct_ = 0, correct_norm_ = 0;
};

}  // namespace ts
