#include "kernels/simd_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ts {

float round_query_i16(const float* q, size_t n, int16_t* out) {
  float amax = 0.0f;
  bool finite = true;
  for (size_t x = 0; x < n; ++x) {
    finite = finite && std::isfinite(q[x]);
    amax = std::max(amax, std::fabs(q[x]));
  }
  // A query too small to scale (kQueryI16Max / amax would overflow) scores 0 everywhere; a
  // non-finite one NaN, as float products would.
  if (!finite || amax < 1e-30f) {
    std::fill_n(out, n, int16_t{0});
    return finite ? 0.0f : std::numeric_limits<float>::quiet_NaN();
  }
  const float scale = amax / kQueryI16Max, inv = kQueryI16Max / amax;
  for (size_t x = 0; x < n; ++x) out[x] = static_cast<int16_t>(std::nearbyint(q[x] * inv));
  return scale;
}

const SimdOps& simd_ops(SimdLevel level) {
  switch (level) {
    case SimdLevel::Avx512:
      return avx512_ops();
    case SimdLevel::Avx2:
      return avx2_ops();
    default:
      return scalar_ops();
  }
}

const SimdOps& ops() {
  static const SimdOps& active = simd_ops(active_simd_level());
  return active;
}

}  // namespace ts
