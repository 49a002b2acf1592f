#pragma once
// Random streams of the generated tasks: example i of a run with a given seed is the same on every
// platform and does not depend on which other examples are generated (--limit picks among them).
#include <cstdint>
#include <random>
#include <vector>

namespace ts {

inline std::mt19937_64 example_rng(uint64_t seed, size_t index) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(index)};
  return std::mt19937_64(seq);
}

// A uniformly drawn item (modulo bias below 2^-50 for these pool sizes; std's distributions are
// implementation-defined, so they would differ between standard libraries).
template <typename T>
const T& pick(std::mt19937_64& rng, const std::vector<T>& items) {
  return items[rng() % items.size()];
}

}  // namespace ts
