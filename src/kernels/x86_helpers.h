#pragma once
// Small x86 helpers shared by the AVX2 and AVX-512 translation units. Internal linkage on
// purpose: each unit is compiled with its own -m flags, and an inline function with external
// linkage could be merged by the linker into the copy built for the other instruction set.
#include <immintrin.h>

#include <cstdint>

namespace ts {
namespace {

// Hardware half-to-float (F16C); the portable fp16_to_float is the scalar reference.
inline float half(uint16_t h) { return _cvtsh_ss(h); }

inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax256(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// 32 unsigned 4-bit weights of a Q4_0/Q4_1 block in activation order: low nibbles then high.
inline __m256i unpack_q4_block(const uint8_t* qs) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0F));
}

}  // namespace
}  // namespace ts
