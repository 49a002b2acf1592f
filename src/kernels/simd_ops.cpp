#include "kernels/simd_ops.h"

namespace ts {

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
