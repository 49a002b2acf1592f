#include "kernels/elementwise.h"

#include <cmath>

namespace ts {

void rope_tables(float pos, const float* inv_freq, size_t rot_dim, RopeLayout layout, float* cos_t,
                 float* sin_t) {
  const size_t half = rot_dim / 2;
  for (size_t i = 0; i < half; ++i) {
    // double: positions reach 10^5 and the angle must not lose the low bits of pos * freq
    const double theta = double(pos) * double(inv_freq[i]);
    const auto c = static_cast<float>(std::cos(theta)), s = static_cast<float>(std::sin(theta));
    const size_t a = layout == RopeLayout::Interleaved ? 2 * i : i;
    const size_t b = layout == RopeLayout::Interleaved ? 2 * i + 1 : i + half;
    cos_t[a] = cos_t[b] = c;
    sin_t[a] = -s;
    sin_t[b] = s;
  }
}

}  // namespace ts
