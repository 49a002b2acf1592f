#include "policies/zipvl/important_tokens.h"

#include <algorithm>
#include <functional>
#include <numeric>

namespace ts {

size_t important_count(std::span<const double> column_sum, double tau) {
  const size_t n = column_sum.size();
  if (n == 0 || tau >= 1.0) return n;
  std::vector<double> sorted(column_sum.begin(), column_sum.end());
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  const double target = tau * std::accumulate(sorted.begin(), sorted.end(), 0.0);
  double mass = 0.0;
  for (size_t p = 0; p < n; ++p) {
    mass += sorted[p];
    if (mass >= target) return p + 1;
  }
  return n;  // rounding kept the sum short of the target
}

std::vector<uint32_t> top_tokens(const ColumnScores& scores, size_t count, TokenRank rank) {
  const size_t n = scores.sum.size();
  std::vector<double> score(n);
  for (size_t j = 0; j < n; ++j)
    score[j] = rank == TokenRank::Sum ? scores.sum[j]
               : scores.nnz[j] > 0    ? scores.sum[j] / scores.nnz[j]
                                      : 0.0;
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  count = std::min(count, n);
  std::partial_sort(
      order.begin(), order.begin() + static_cast<std::ptrdiff_t>(count), order.end(),
      [&](uint32_t a, uint32_t b) { return score[a] != score[b] ? score[a] > score[b] : a > b; });
  order.resize(count);
  std::sort(order.begin(), order.end());
  return order;
}

}  // namespace ts
