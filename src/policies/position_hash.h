#pragma once
// Random choices of randomised baselines that do not depend on how tokens are batched: a uniform
// number in [0, 1) fixed by (seed, layer, position) (splitmix64).
#include <cstddef>
#include <cstdint>

namespace ts {

inline float uniform_at(uint64_t seed, size_t layer, size_t pos) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (1 + (uint64_t{layer} << 32 | pos));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return static_cast<float>((z ^ (z >> 31)) >> 40) / static_cast<float>(1 << 24);
}

}  // namespace ts
