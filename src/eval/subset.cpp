#include "eval/subset.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <string>

#include "core/error.h"

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

std::pair<size_t, size_t> Shard::range(size_t n) const {
  // In 128 bits: n * index overflows 64 bits only for absurd n, but a wrong range would be silent.
  const auto at = [&](size_t i) {
    return static_cast<size_t>(static_cast<unsigned __int128>(n) * i / count);
  };
  return {at(index), at(index + 1)};
}

Shard parse_shard(std::string_view text) {
  const size_t slash = text.find('/');
  const auto number = [&](std::string_view digits, size_t* out) {
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string_view::npos)
      return false;
    *out = std::stoul(std::string(digits));
    return true;
  };
  Shard s;
  TS_CHECK(slash != std::string_view::npos && number(text.substr(0, slash), &s.index) &&
               number(text.substr(slash + 1), &s.count) && s.count >= 1 && s.index < s.count,
           "shard '", text, "': expected I/N with 0 <= I < N (e.g. 0/4)");
  return s;
}

}  // namespace ts
