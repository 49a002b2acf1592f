// AVX-512 VNNI register-blocked product of quantized weight rows with 8-bit activations:
// RB rows x TB tokens per tile, 64 values (two 32-value blocks) per step, so each unpacked
// weight vector is reused for TB tokens and each activation vector for RB rows.
#include <immintrin.h>

#include <cstring>

#include "kernels/avx512/avx512_helpers.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_dot_tables.h"

namespace ts::avx512 {
namespace {

// The first four bytes of blocks b and b+1 read as two fp16 fields each and converted at once:
// [f0 g0 f1 g1] (for types with one leading field, g is unused).
__m512 head_fields(const void* b0, const void* b1) {
  uint32_t a0, a1;
  std::memcpy(&a0, b0, 4);
  std::memcpy(&a1, b1, 4);
  return _mm512_castps128_ps512(
      _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<int64_t>(uint64_t{a1} << 32 | a0))));
}
// Spreads field 0/1 of each block over that block's 8 lanes.
__m512 spread(__m512 fields, int field) {
  const __m512i idx = field == 0 ? _mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0)
                                 : _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1);
  return _mm512_permutexvar_ps(idx, fields);
}

// Per weight type: 64 weights of blocks (b, b+1) as bytes, their scales, and the per-lane
// coefficient of the activation block sum s. The caller passes s/8 per lane (a block has 8
// lanes), so the coefficient is the block's offset per unit of s.
struct Q4_1Kind {
  using Block = BlockQ4_1;
  static constexpr bool kSigned = false, kOffset = true;
  static __m512i weights(const Block* b) { return load_two_q4<sizeof(Block), 4>(b); }
  static void scales(const Block* b, __m512& d, __m512& off) {  // x = d q + m
    const __m512 f = head_fields(&b[0], &b[1]);
    d = spread(f, 0);
    off = spread(f, 1);
  }
};
struct Q4_0Kind {
  using Block = BlockQ4_0;
  static constexpr bool kSigned = false, kOffset = true;
  static __m512i weights(const Block* b) { return load_two_q4<sizeof(Block), 2>(b); }
  static void scales(const Block* b, __m512& d, __m512& off) {  // x = d (q - 8)
    d = spread(head_fields(&b[0], &b[1]), 0);
    off = _mm512_mul_ps(d, _mm512_set1_ps(-8.0f));
  }
};
struct Q8_0Kind {
  using Block = BlockQ8_0;
  static constexpr bool kSigned = true, kOffset = false;
  static __m512i weights(const Block* b) {
    return _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[0].qs))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[1].qs)), 1);
  }
  static void scales(const Block* b, __m512& d, __m512&) { d = spread(head_fields(&b[0], &b[1]), 0); }
};

// Even block counts only; the caller finishes an odd last block with single dot products.
template <class K, int RB, int TB>
void tile(const uint8_t* w, size_t row_stride, size_t n_pairs, const Q8Activations& x, size_t t0, float* y,
          size_t y_stride) {
  using Block = typename K::Block;
  __m512 acc[RB][TB];
  for (int r = 0; r < RB; ++r)
    for (int t = 0; t < TB; ++t) acc[r][t] = _mm512_setzero_ps();
  for (size_t p = 0; p < n_pairs; ++p) {
    const size_t b = 2 * p;
    __m512i xq[TB];
    __m512 xd[TB], xs[TB];
    for (int t = 0; t < TB; ++t) {
      xq[t] = _mm512_loadu_si512(x.row_qs(t0 + t) + b * kQ8Block);
      xd[t] = two_scales(x.row_d(t0 + t)[b], x.row_d(t0 + t)[b + 1]);
      if constexpr (K::kOffset) xs[t] = two_scales(x.row_s(t0 + t)[b] / 8, x.row_s(t0 + t)[b + 1] / 8);
    }
    for (int r = 0; r < RB; ++r) {
      const Block* blk = reinterpret_cast<const Block*>(w + r * row_stride) + b;
      const __m512i wq = K::weights(blk);
      __m512 wd, wo;
      K::scales(blk, wd, wo);
      __m512i wabs = wq;
      __mmask64 wneg = 0;
      if constexpr (K::kSigned) {  // vpdpbusd takes unsigned weights: |w|, and x carries w's sign
        wabs = _mm512_abs_epi8(wq);
        wneg = _mm512_movepi8_mask(wq);
      }
      for (int t = 0; t < TB; ++t) {
        __m512i xv = xq[t];
        if constexpr (K::kSigned) xv = _mm512_mask_sub_epi8(xv, wneg, _mm512_setzero_si512(), xv);
        const __m512i sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wabs, xv);
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(wd, xd[t]), acc[r][t]);
        if constexpr (K::kOffset) acc[r][t] = _mm512_fmadd_ps(wo, xs[t], acc[r][t]);
      }
    }
  }
  for (int r = 0; r < RB; ++r)
    for (int t = 0; t < TB; ++t) y[t * y_stride + r] = _mm512_reduce_add_ps(acc[r][t]);
}

template <class K>
void gemm(const uint8_t* w, size_t row_stride, size_t n_rows, const Q8Activations& x, size_t t0, size_t n_tok,
          float* y, size_t y_stride) {
  // 8 accumulators + operands fit the 32 zmm registers: 4 rows x 2 tokens, or 8 rows for a
  // single token (decode), where more rows share each activation vector.
  constexpr int RB = 4, TB = 2, RB_SINGLE = 8;
  const size_t n_pairs = x.blocks_per_row() / 2;
  size_t r = 0;
  if (n_tok == 1)
    for (; r + RB_SINGLE <= n_rows; r += RB_SINGLE)
      tile<K, RB_SINGLE, 1>(w + r * row_stride, row_stride, n_pairs, x, t0, y + r, y_stride);
  for (; r + RB <= n_rows; r += RB) {
    size_t t = 0;
    for (; t + TB <= n_tok; t += TB)
      tile<K, RB, TB>(w + r * row_stride, row_stride, n_pairs, x, t0 + t, y + t * y_stride + r, y_stride);
    for (; t < n_tok; ++t)
      tile<K, RB, 1>(w + r * row_stride, row_stride, n_pairs, x, t0 + t, y + t * y_stride + r, y_stride);
  }
  for (; r < n_rows; ++r)
    for (size_t t = 0; t < n_tok; ++t)
      tile<K, 1, 1>(w + r * row_stride, row_stride, n_pairs, x, t0 + t, y + t * y_stride + r, y_stride);
}

}  // namespace

void gemm_q8(QuantType type, const uint8_t* w, size_t row_stride, size_t n_rows, const Q8Activations& x,
             size_t t0, size_t n_tok, float* y, size_t y_stride) {
  switch (type) {
    case QuantType::Q4_0:
      gemm<Q4_0Kind>(w, row_stride, n_rows, x, t0, n_tok, y, y_stride);
      break;
    case QuantType::Q4_1:
      gemm<Q4_1Kind>(w, row_stride, n_rows, x, t0, n_tok, y, y_stride);
      break;
    case QuantType::Q8_0:
      gemm<Q8_0Kind>(w, row_stride, n_rows, x, t0, n_tok, y, y_stride);
      break;
    default:  // the code-form types: one dot product per (row, token)
      gemm_by_dots<dot_q8>(type, w, row_stride, n_rows, x, t0, n_tok, y, y_stride);
      return;
  }
  if (x.blocks_per_row() % 2 == 0) return;
  // Odd block count: add the last block of every (row, token) with the single-row kernel.
  const size_t last = x.blocks_per_row() - 1, block_bytes = quant_traits(type).block_bytes;
  for (size_t t = 0; t < n_tok; ++t) {
    const Q8Row row{x.row_qs(t0 + t) + last * kQ8Block, x.row_d(t0 + t) + last, x.row_s(t0 + t) + last};
    for (size_t r = 0; r < n_rows; ++r)
      y[t * y_stride + r] += dot_q8(type, w + r * row_stride + last * block_bytes, row, 1);
  }
}

}  // namespace ts::avx512
