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

inline int hsum256_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// Eight int32 sums, lane i of the four products u[4i + k] * s[4i + k] (unsigned times signed
// bytes): vpdpbusd where AVX-512 VNNI is there, else pmaddubsw (int16 pair sums, which saturate:
// exact for the operands of our callers) and pmaddwd.
inline __m256i dot_u8_s8(__m256i u, __m256i s) {
#ifdef __AVX512VNNI__
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

// dot_u8_s8(u0, s0) + dot_u8_s8(u1, s1), the two int16 pair sums added before widening (exact for
// codes of up to 4 bits: 4 * 15 * 127 < 2^15).
inline __m256i dot2_u8_s8(__m256i u0, __m256i s0, __m256i u1, __m256i s1) {
#ifdef __AVX512VNNI__
  return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u0, s0), u1, s1);
#else
  return _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(u0, s0), _mm256_maddubs_epi16(u1, s1)),
                           _mm256_set1_epi16(1));
#endif
}

// Lane i = the sum of the 8 floats at rows + 8 * i (one transposed horizontal sum for 8 rows).
inline __m256 row_sums_8x8(const float* rows) {
  const auto at = [&](int i) { return _mm256_loadu_ps(rows + 8 * i); };
  const __m256 a = _mm256_hadd_ps(at(0), at(1)), b = _mm256_hadd_ps(at(2), at(3));
  const __m256 c = _mm256_hadd_ps(at(4), at(5)), d = _mm256_hadd_ps(at(6), at(7));
  const __m256 ab = _mm256_hadd_ps(a, b), cd = _mm256_hadd_ps(c, d);  // rows 0-3 | 4-7 per half
  return _mm256_add_ps(_mm256_permute2f128_ps(ab, cd, 0x20), _mm256_permute2f128_ps(ab, cd, 0x31));
}

inline float hmax256(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

}  // namespace
}  // namespace ts
