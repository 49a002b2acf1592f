#include "kernels/simd_ops.h"

#include "kernels/quant_codes.h"

namespace ts {

bool has_q8_dot(QuantType type) {
  return type == QuantType::Q4_0 || type == QuantType::Q4_1 || type == QuantType::Q8_0 || has_code_form(type);
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
