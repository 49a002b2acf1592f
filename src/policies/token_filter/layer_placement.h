#pragma once
// Which layers an attention-skipping policy acts on (paper 003, Sec. 3.3 and Table 5): the last
// Y fraction ("tail-focused", the method), the first Y fraction ("head-focused") or every layer
// ("uniform"). round(Y * L) layers, at least one.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

namespace ts {

enum class Placement : uint8_t { Tail, Head, Uniform };

inline std::vector<uint32_t> placed_layers(Placement placement, double fraction, size_t n_layers) {
  const size_t n =
      placement == Placement::Uniform
          ? n_layers
          : std::clamp<size_t>(static_cast<size_t>(std::lround(fraction * double(n_layers))), 1, n_layers);
  std::vector<uint32_t> layers(n);
  std::iota(layers.begin(), layers.end(), placement == Placement::Tail ? uint32_t(n_layers - n) : 0u);
  return layers;
}

}  // namespace ts
