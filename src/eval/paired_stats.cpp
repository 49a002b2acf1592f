#include "eval/paired_stats.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/error.h"

namespace ts {
namespace {

// The statistic of one run (values: a or b of each group) over the units idx[g] of each group g.
double statistic_of(const std::vector<PairedGroup>& groups, bool run_b,
                    const std::vector<std::vector<size_t>>& idx, PairedStatistic statistic) {
  double total = 0.0, weight = 0.0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<double>& v = run_b ? groups[g].b : groups[g].a;
    double sum = 0.0, w = 0.0;
    for (const size_t i : idx[g]) {
      sum += v[i];
      w += statistic == PairedStatistic::Perplexity ? groups[g].weight[i] : 1.0;
    }
    if (statistic == PairedStatistic::Perplexity) {
      total += sum;
      weight += w;
    } else {
      total += sum / w;
    }
  }
  return statistic == PairedStatistic::Perplexity ? std::exp(total / weight) : total / double(groups.size());
}

}  // namespace

double quantile_sorted(const std::vector<double>& sorted, double q) {
  TS_CHECK(!sorted.empty(), "quantile of no values");
  const double at = q * double(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(at));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (at - double(lo)) * (sorted[hi] - sorted[lo]);
}

PairedComparison paired_bootstrap(const std::vector<PairedGroup>& groups, PairedStatistic statistic,
                                  size_t resamples, uint64_t seed) {
  TS_CHECK(!groups.empty() && resamples > 0, "paired bootstrap: no groups or no resamples");
  PairedComparison r;
  std::vector<std::vector<size_t>> idx(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const PairedGroup& grp = groups[g];
    TS_CHECK(!grp.a.empty() && grp.a.size() == grp.b.size(), "paired bootstrap: a group of ", grp.a.size(),
             " units in A and ", grp.b.size(), " in B");
    TS_CHECK(statistic != PairedStatistic::Perplexity || grp.weight.size() == grp.a.size(),
             "paired bootstrap: perplexity needs a weight per unit");
    idx[g].resize(grp.a.size());
    for (size_t i = 0; i < idx[g].size(); ++i) idx[g][i] = i;
    r.units += grp.a.size();
  }
  r.a = statistic_of(groups, false, idx, statistic);
  r.b = statistic_of(groups, true, idx, statistic);
  r.diff = r.b - r.a;
  std::mt19937_64 rng(seed);
  std::vector<double> diffs(resamples);
  for (double& d : diffs) {
    for (size_t g = 0; g < groups.size(); ++g) {
      std::uniform_int_distribution<size_t> pick(0, groups[g].a.size() - 1);
      for (size_t& i : idx[g]) i = pick(rng);
    }
    d = statistic_of(groups, true, idx, statistic) - statistic_of(groups, false, idx, statistic);
  }
  std::sort(diffs.begin(), diffs.end());
  r.diff_ci = {quantile_sorted(diffs, 0.025), quantile_sorted(diffs, 0.975)};
  return r;
}

McNemar mcnemar_exact(const std::vector<double>& a, const std::vector<double>& b) {
  TS_CHECK(a.size() == b.size(), "McNemar: ", a.size(), " outcomes in A and ", b.size(), " in B");
  McNemar r;
  for (size_t i = 0; i < a.size(); ++i) {
    TS_CHECK((a[i] == 0.0 || a[i] == 1.0) && (b[i] == 0.0 || b[i] == 1.0),
             "McNemar: outcomes must be 0 or 1, unit ", i, " has ", a[i], " and ", b[i]);
    r.a_only += a[i] > b[i];
    r.b_only += b[i] > a[i];
  }
  const size_t n = r.a_only + r.b_only, k = std::min(r.a_only, r.b_only);
  if (n == 0) return r;
  // P(X <= k) for X ~ Binomial(n, 1/2), summed in logs (n reaches thousands).
  double tail = 0.0;
  for (size_t i = 0; i <= k; ++i)
    tail += std::exp(std::lgamma(double(n) + 1) - std::lgamma(double(i) + 1) -
                     std::lgamma(double(n - i) + 1) - double(n) * std::log(2.0));
  r.p = std::min(1.0, 2.0 * tail);
  return r;
}

}  // namespace ts
