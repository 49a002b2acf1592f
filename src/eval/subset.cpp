#include "eval/subset.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace ts {

std::vector<size_t> select_examples(size_t n, size_t limit, std::optional<uint64_t> seed) {
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), size_t{0});
  if (limit == 0 || limit >= n) return idx;
  if (seed) {
    std::mt19937_64 rng(*seed);
    // The first `limit` places of a Fisher-Yates shuffle (modulo bias is below 2^-50 here).
    for (size_t i = 0; i < limit; ++i) std::swap(idx[i], idx[i + rng() % (n - i)]);
    idx.resize(limit);
    std::sort(idx.begin(), idx.end());
  } else {
    idx.resize(limit);
  }
  return idx;
}

}  // namespace ts
