#include "core/cpu_features.h"

#include <cstdlib>
#include <cstring>

namespace ts {

SimdLevel detected_simd_level() {
  static const SimdLevel level = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bf16") &&
        __builtin_cpu_supports("avx512vbmi"))
      return SimdLevel::Avx512;
    // Every AVX2 CPU also has F16C (Haswell and Excavator onwards); clang 14 cannot query "f16c".
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("popcnt"))
      return SimdLevel::Avx2;
    return SimdLevel::Scalar;
  }();
  return level;
}

SimdLevel active_simd_level() {
  SimdLevel level = detected_simd_level();
  if (const char* cap = std::getenv("TS_SIMD")) {
    SimdLevel wanted = level;
    if (std::strcmp(cap, "scalar") == 0) wanted = SimdLevel::Scalar;
    if (std::strcmp(cap, "avx2") == 0) wanted = SimdLevel::Avx2;
    if (wanted < level) level = wanted;
  }
  return level;
}

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::Avx512:
      return "avx512";
    case SimdLevel::Avx2:
      return "avx2";
    default:
      return "scalar";
  }
}

}  // namespace ts
