// compress_range on AVX2, which has no compress instruction: each 8 keys' mask (one bit a lane)
// looks up the lanes it keeps, packed to the front, and one permute moves the values there.
#include <immintrin.h>

#include <array>

#include "kernels/compress_kernels.h"

namespace ts::avx2 {
namespace {

// kFrontLanes[m], byte i: the lane of the i-th set bit of m (bytes past the last set bit: 0).
constexpr std::array<uint64_t, 256> front_lanes() {
  std::array<uint64_t, 256> t{};
  for (unsigned m = 0; m < 256; ++m)
    for (unsigned lane = 0, i = 0; lane < 8; ++lane)
      if (m >> lane & 1) t[m] |= uint64_t{lane} << (8 * i++);
  return t;
}
constexpr std::array<uint64_t, 256> kFrontLanes = front_lanes();

}  // namespace

RangeCount compress_range(const uint32_t* keys, const uint32_t* values, size_t n, uint32_t lo, uint32_t hi,
                          uint32_t* out) {
  const __m256i vlo = _mm256_set1_epi32(static_cast<int>(lo)), vhi = _mm256_set1_epi32(static_cast<int>(hi));
  RangeCount c;
  size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256i k = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + j));
    // Unsigned comparisons: k >= lo iff max(k, lo) == k, k <= hi iff min(k, hi) == k.
    const __m256i at_least = _mm256_cmpeq_epi32(_mm256_max_epu32(k, vlo), k);
    const __m256i at_most = _mm256_cmpeq_epi32(_mm256_min_epu32(k, vhi), k);
    const auto in =
        static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_and_si256(at_least, at_most))));
    const auto not_above = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(at_most)));
    const __m256i lanes = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(kFrontLanes[in])));
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + j));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + c.in_range), _mm256_permutevar8x32_epi32(v, lanes));
    c.in_range += static_cast<size_t>(_mm_popcnt_u32(in));
    c.above += 8 - static_cast<size_t>(_mm_popcnt_u32(not_above));
  }
  const RangeCount tail = scalar::compress_range(keys + j, values + j, n - j, lo, hi, out + c.in_range);
  return {c.in_range + tail.in_range, c.above + tail.above};
}

}  // namespace ts::avx2
