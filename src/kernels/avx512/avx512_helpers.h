#pragma once
// AVX-512 helpers of the quantized kernels (internal linkage: see kernels/x86_helpers.h).
#include <immintrin.h>

#include <array>
#include <cstdint>

namespace ts {
namespace {

// [lo x8, hi x8]: one scale per 32-value block, spread over that block's 8 int32 lanes.
inline __m512 two_scales(float lo, float hi) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(lo)), _mm256_set1_ps(hi), 1);
}

// Two consecutive Q4 blocks (kBlock bytes each, packed nibbles after kHead bytes of scales) in one
// masked load; a byte permute places each block's 16 packed bytes twice, and per-lane shifts keep
// the low nibbles in the first copy and the high ones in the second: [lo0 hi0 lo1 hi1] as u8.
template <int kBlock, int kHead>
inline __m512i load_two_q4(const void* blocks) {
  alignas(64) static const auto kIndex = [] {
    std::array<uint8_t, 64> idx{};
    for (int i = 0; i < 64; ++i) idx[i] = static_cast<uint8_t>((i / 32) * kBlock + kHead + i % 16);
    return idx;
  }();
  const __m512i raw = _mm512_maskz_loadu_epi8((uint64_t{1} << (2 * kBlock)) - 1, blocks);
  const __m512i shift = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
  const __m512i twice = _mm512_permutexvar_epi8(_mm512_load_si512(kIndex.data()), raw);
  return _mm512_and_si512(_mm512_srlv_epi64(twice, shift), _mm512_set1_epi8(0x0F));
}

}  // namespace
}  // namespace ts
