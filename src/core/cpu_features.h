#pragma once
// Which SIMD instruction sets this CPU supports, detected once; TS_SIMD=scalar|avx2|avx512 caps it.
namespace ts {

enum class SimdLevel { Scalar = 0, Avx2 = 1, Avx512 = 2 };

SimdLevel detected_simd_level();  // what the CPU (and OS) support
SimdLevel active_simd_level();    // detected, lowered by the TS_SIMD environment variable
const char* simd_level_name(SimdLevel level);

}  // namespace ts
