// compress_range on AVX-512: vpcompressd packs each 16 keys' kept values to the front of a register,
// then a store masked to their count (the compressing store to memory is microcoded on AMD's cores).
#include <immintrin.h>

#include "kernels/compress_kernels.h"

namespace ts::avx512 {

RangeCount compress_range(const uint32_t* keys, const uint32_t* values, size_t n, uint32_t lo, uint32_t hi,
                          uint32_t* out) {
  const __m512i vlo = _mm512_set1_epi32(static_cast<int>(lo)), vhi = _mm512_set1_epi32(static_cast<int>(hi));
  RangeCount c;
  for (size_t j = 0; j < n; j += 16) {
    const __mmask16 live = n - j >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (n - j)) - 1);
    const __m512i k = _mm512_maskz_loadu_epi32(live, keys + j);
    const __mmask16 at_most = _mm512_mask_cmple_epu32_mask(live, k, vhi);
    const __mmask16 in = _mm512_mask_cmpge_epu32_mask(at_most, k, vlo);
    const __m512i v = _mm512_maskz_loadu_epi32(in, values + j);
    const auto kept = static_cast<unsigned>(_mm_popcnt_u32(in));
    _mm512_mask_storeu_epi32(out + c.in_range, static_cast<__mmask16>((1u << kept) - 1),
                             _mm512_maskz_compress_epi32(in, v));
    c.in_range += kept;
    c.above += static_cast<size_t>(_mm_popcnt_u32(live)) - static_cast<size_t>(_mm_popcnt_u32(at_most));
  }
  return c;
}

}  // namespace ts::avx512
