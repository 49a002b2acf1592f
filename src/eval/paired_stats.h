#pragma once
// Paired comparisons of two runs over the same units (perplexity windows, task documents): the
// difference of a statistic with a paired bootstrap 95% interval, and McNemar's exact test for
// outcomes that are right or wrong. Two configurations scored on the same units differ far less
// than two independent samples would suggest: resampling the units (not each run on its own)
// keeps the pairing, so the interval of B - A is as narrow as the data allow.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ts {

// One stratum of units, the same units in both runs: per unit, run A's and run B's values
// (perplexity: the unit's NLL sum; accuracy: its score) and its weight (perplexity: the tokens
// it scored; otherwise unused).
struct PairedGroup {
  std::vector<double> a, b, weight;
};

enum class PairedStatistic {
  Mean,        // the mean over groups of each group's mean value (one group: the plain mean)
  Perplexity,  // exp(sum of values / sum of weights) over every unit of every group
};

struct Interval {
  double lo = 0.0, hi = 0.0;
};

struct PairedComparison {
  double a = 0.0, b = 0.0, diff = 0.0;  // the statistic on A, on B, and B - A
  Interval diff_ci;                     // paired bootstrap percentile 95% interval of B - A
  size_t units = 0;
};

// The statistic on A and on B, and the 2.5% and 97.5% quantiles (linear interpolation, as
// numpy.quantile) of B - A over `resamples` bootstrap samples: each draws every group's units
// with replacement, as many as the group has, the same draw for A and B.
PairedComparison paired_bootstrap(const std::vector<PairedGroup>& groups, PairedStatistic statistic,
                                  size_t resamples, uint64_t seed);

// McNemar's exact test on 0/1 outcomes of the same units: a_only units right in A and wrong in
// B, b_only the reverse; p = the two-sided binomial probability of a split at least this uneven
// among the a_only + b_only discordant units under p = 1/2 (1 when there are none).
struct McNemar {
  size_t a_only = 0, b_only = 0;
  double p = 1.0;
};
McNemar mcnemar_exact(const std::vector<double>& a, const std::vector<double>& b);

// The q-quantile of sorted values, interpolating linearly between order statistics.
double quantile_sorted(const std::vector<double>& sorted, double q);

}  // namespace ts
