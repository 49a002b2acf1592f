// Paired statistics of `tokensieve compare`: McNemar's exact test and quantiles against values
// worked by hand, and the paired bootstrap on samples whose answer is known (an exact shift, a
// perplexity ratio, a paired difference far narrower than the runs' own spread).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/error.h"
#include "eval/paired_stats.h"

namespace ts {
namespace {

std::vector<double> outcomes(size_t ones, size_t zeros) {
  std::vector<double> v(ones, 1.0);
  v.resize(ones + zeros, 0.0);
  return v;
}

TEST(PairedStats, McNemarExactAgainstTheBinomialByHand) {
  // 10 units right only in A, 2 only in B, 30 right in both, 8 wrong in both:
  // p = 2 * (C(12,0) + C(12,1) + C(12,2)) / 2^12 = 158 / 4096.
  std::vector<double> a = outcomes(10, 2), b = outcomes(0, 12);
  std::fill(b.begin() + 10, b.end(), 1.0);
  for (int i = 0; i < 30; ++i) a.push_back(1.0), b.push_back(1.0);
  for (int i = 0; i < 8; ++i) a.push_back(0.0), b.push_back(0.0);
  const McNemar m = mcnemar_exact(a, b);
  EXPECT_EQ(m.a_only, 10u);
  EXPECT_EQ(m.b_only, 2u);
  EXPECT_NEAR(m.p, 158.0 / 4096.0, 1e-12);
  // Swapping the runs gives the same p; an even split and no discordant unit give 1.
  EXPECT_NEAR(mcnemar_exact(b, a).p, m.p, 1e-12);
  EXPECT_EQ(mcnemar_exact(outcomes(3, 3), outcomes(3, 3)).p, 1.0);
  EXPECT_EQ(mcnemar_exact({1, 0, 1, 0}, {0, 1, 0, 1}).p, 1.0);
  // Large n stays finite: 600 vs 400 discordant units is far from even.
  std::vector<double> big_a = outcomes(600, 400), big_b = outcomes(0, 1000);
  std::fill(big_b.begin() + 600, big_b.end(), 1.0);
  const double p = mcnemar_exact(big_a, big_b).p;
  EXPECT_GT(p, 0.0);
  EXPECT_LT(p, 1e-9);
  EXPECT_THROW(mcnemar_exact({0.5}, {1.0}), Error);
  EXPECT_THROW(mcnemar_exact({1.0}, {1.0, 0.0}), Error);
}

TEST(PairedStats, QuantilesInterpolateAsNumpy) {
  const std::vector<double> v = {1.0, 2.0, 3.0, 4.0};
  EXPECT_DOUBLE_EQ(quantile_sorted(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(quantile_sorted(v, 0.25), 1.75);  // numpy.quantile([1, 2, 3, 4], 0.25)
  EXPECT_DOUBLE_EQ(quantile_sorted(v, 0.975), 3.925);
  EXPECT_DOUBLE_EQ(quantile_sorted(v, 1.0), 4.0);
}

TEST(PairedStats, BootstrapOfAnExactShiftIsThatShift) {
  std::mt19937 rng(3);
  std::normal_distribution<double> noise(0.6, 0.3);
  PairedGroup g;
  for (int i = 0; i < 200; ++i) {
    g.a.push_back(noise(rng));
    g.b.push_back(g.a.back() + 0.125);
  }
  const PairedComparison c = paired_bootstrap({g}, PairedStatistic::Mean, 2000, 7);
  EXPECT_EQ(c.units, 200u);
  EXPECT_NEAR(c.diff, 0.125, 1e-12);
  EXPECT_NEAR(c.diff_ci.lo, 0.125, 1e-12);  // every resample moves A and B together
  EXPECT_NEAR(c.diff_ci.hi, 0.125, 1e-12);
  const PairedComparison same = paired_bootstrap({PairedGroup{g.a, g.a, {}}}, PairedStatistic::Mean, 500, 7);
  EXPECT_EQ(same.diff, 0.0);
  EXPECT_EQ(same.diff_ci.lo, 0.0);
  EXPECT_EQ(same.diff_ci.hi, 0.0);
}

TEST(PairedStats, PerplexityIsTheTokenWeightedNll) {
  // Windows of different sizes; B's NLL per token is A's plus 0.1 everywhere: B = A * e^0.1.
  PairedGroup g;
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> per_token(2.0, 4.0);
  double nll = 0.0, tokens = 0.0;
  for (int w = 0; w < 50; ++w) {
    const double n = 100 + w, mean = per_token(rng);
    g.a.push_back(mean * n);
    g.b.push_back((mean + 0.1) * n);
    g.weight.push_back(n);
    nll += mean * n;
    tokens += n;
  }
  const PairedComparison c = paired_bootstrap({g}, PairedStatistic::Perplexity, 2000, 1);
  EXPECT_NEAR(c.a, std::exp(nll / tokens), 1e-9 * c.a);
  EXPECT_NEAR(c.b, c.a * std::exp(0.1), 1e-9 * c.b);
  EXPECT_NEAR(c.diff, c.a * (std::exp(0.1) - 1.0), 1e-9 * c.b);
  EXPECT_LT(c.diff_ci.lo, c.diff);
  EXPECT_GT(c.diff_ci.hi, c.diff);
  EXPECT_GT(c.diff_ci.lo, 0.0);  // B is worse in every window
  PairedGroup no_weights = g;
  no_weights.weight.clear();
  EXPECT_THROW(paired_bootstrap({no_weights}, PairedStatistic::Perplexity, 100, 1), Error);
}

TEST(PairedStats, PairingNarrowsTheIntervalAndGroupsAverage) {
  // Units vary a lot (sd 1) but B differs from A by 0.05 +- 0.01: the paired interval of B - A
  // is about 0.01 / sqrt(n) wide, not the unpaired 1 * sqrt(2 / n).
  std::mt19937 rng(11);
  std::normal_distribution<double> unit(0.0, 1.0), diff(0.05, 0.01);
  PairedGroup g1, g2;
  for (int i = 0; i < 400; ++i) {
    g1.a.push_back(unit(rng));
    g1.b.push_back(g1.a.back() + diff(rng));
  }
  for (int i = 0; i < 100; ++i) {
    g2.a.push_back(1.0);
    g2.b.push_back(0.0);
  }
  const PairedComparison c = paired_bootstrap({g1}, PairedStatistic::Mean, 4000, 2);
  EXPECT_LT(c.diff_ci.lo, c.diff);
  EXPECT_GT(c.diff_ci.hi, c.diff);
  EXPECT_GT(c.diff_ci.lo, 0.04);
  EXPECT_LT(c.diff_ci.hi, 0.06);
  EXPECT_LT(c.diff_ci.hi - c.diff_ci.lo, 0.01);  // unpaired it would be about 0.28
  // Two groups: the statistic is the mean of the group means, whatever their sizes.
  const PairedComparison avg = paired_bootstrap({g1, g2}, PairedStatistic::Mean, 1000, 2);
  EXPECT_NEAR(avg.diff, (c.diff - 1.0) / 2.0, 1e-12);
  EXPECT_EQ(avg.units, 500u);
}

}  // namespace
}  // namespace ts
