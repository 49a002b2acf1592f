#include "kernels/simd_ops.h"

#include <cmath>

namespace ts {

float round_query_i16(const float* q, size_t n, int16_t* out) {
  float amax = 0.0f;
  for (size_t x = 0; x < n; ++x) amax = std::fmax(amax, std::fabs(q[x]));
  const float scale = amax / kQueryI16Max, inv = amax > 0.0f ? kQueryI16Max / amax : 0.0f;
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
