#include "eval/mc_metrics.h"

#include <cmath>

#include "core/error.h"

namespace ts {

McOutcome judge(const McExample& ex, const std::vector<double>& loglikelihoods) {
  TS_CHECK(loglikelihoods.size() == ex.choices.size() && !ex.choices.empty(),
           "judge: ", loglikelihoods.size(), " log-likelihoods for ", ex.choices.size(), " choices");
  size_t best = 0, best_norm = 0;
  const auto norm = [&](size_t i) { return loglikelihoods[i] / double(ex.choices[i].norm_length); };
  for (size_t i = 1; i < loglikelihoods.size(); ++i) {
    if (loglikelihoods[i] > loglikelihoods[best]) best = i;
    if (norm(i) > norm(best_norm)) best_norm = i;
  }
  return {best == ex.gold, best_norm == ex.gold};
}

void McAccumulator::add(const McOutcome& o) {
  ++n_;
  correct_ += o.correct;
  correct_norm_ += o.correct_norm;
}

McMetrics McAccumulator::metrics() const {
  McMetrics m;
  m.n = n_;
  if (n_ == 0) return m;
  m.acc = double(correct_) / double(n_);
  m.acc_norm = double(correct_norm_) / double(n_);
  // lm-eval's mean_stderr: sample standard deviation / sqrt(n); for 0/1 values the sample
  // variance is n p (1 - p) / (n - 1).
  if (n_ >= 2) m.acc_stderr = std::sqrt(m.acc * (1.0 - m.acc) / double(n_ - 1));
  return m;
}

}  // namespace ts
