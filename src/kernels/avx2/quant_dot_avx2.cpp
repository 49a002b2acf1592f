// AVX2 activation quantization and packed integer products (maddubs: u8 x s8 -> s16 pairs).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/block_runs.h"
#include "kernels/packed_gemm_x86.h"
#include "kernels/quant_dot_tables.h"
#include "kernels/simd_ops.h"
#include "kernels/x86_helpers.h"

namespace ts::avx2 {
namespace {

// Packed groups (packed_gemm_x86.h): one ymm lane per row, half a 16-row group per pass.
struct PackedAvx2 {
  using F = __m256;
  using I = __m256i;
  static constexpr size_t kRows = 8;
  static constexpr int kTokens = 4;      // 4 float + 4 int accumulators and the codes: 16 ymm
  static constexpr int kSignedBias = 0;  // signed weights through the sign trick, no bias
  static constexpr bool kPairSums = true;
  static F zero() { return _mm256_setzero_ps(); }
  static I iset1(int a) { return _mm256_set1_epi32(a); }
  static I isub(I a, I b) { return _mm256_sub_epi32(a, b); }
  static I izero() { return _mm256_setzero_si256(); }
  static F set1(float a) { return _mm256_set1_ps(a); }
  static I load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static F halves(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static I srl(I v, int n) { return _mm256_srl_epi16(v, _mm_cvtsi32_si128(n)); }
  static I sll(I v, int n) { return _mm256_sll_epi16(v, _mm_cvtsi32_si128(n)); }
  static I and_bytes(I v, int mask) { return _mm256_and_si256(v, _mm256_set1_epi8(static_cast<char>(mask))); }
  static I or_(I a, I b) { return _mm256_or_si256(a, b); }
  // kRows scale bytes of a k-quant unit as floats.
  static F u8_to_f(const uint8_t* p) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(load8(p))); }
  static F i8_to_f(const uint8_t* p) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(load8(p))); }
  static __m128i load8(const uint8_t* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }
  static I broadcast4(const int8_t* x) {
    int32_t v;
    std::memcpy(&v, x, 4);
    return _mm256_set1_epi32(v);
  }
  static I dot_unsigned(I acc, I u, const int8_t* x) {
    return _mm256_add_epi32(acc, dot_u8_s8(u, broadcast4(x)));
  }
  // int16 sums of adjacent u8 x s8 products, added in int16, widened to int32 once per few slices.
  static I pair_dot(I u, const int8_t* x) { return _mm256_maddubs_epi16(u, broadcast4(x)); }
  static I add16(I a, I b) { return _mm256_add_epi16(a, b); }
  static I widen_add(I acc, I sums16) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(sums16, _mm256_set1_epi16(1)));
  }
  // maddubs needs an unsigned operand: |w| times x carrying w's sign.
  static I dot_signed(I acc, I w, const int8_t* x) {
    return _mm256_add_epi32(acc, dot_u8_s8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(broadcast4(x), w)));
  }
  static F cvt(I v) { return _mm256_cvtepi32_ps(v); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F fnmadd(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }
  static void store(float* y, F v, size_t n) {
    if (n == kRows) return _mm256_storeu_ps(y, v);
    alignas(32) float tmp[kRows];
    _mm256_store_ps(tmp, v);
    std::copy_n(tmp, n, y);
  }
};

}  // namespace

void quantize_q8(const float* x, size_t n, int8_t* qs, float* d, int16_t* sums) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (size_t b = 0; b < n / kQ8Block; ++b) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + b * kQ8Block + 8 * i);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[i]));
    }
    const float am = hmax256(amax);
    const __m256 inv = _mm256_set1_ps(am > 0 ? 127.0f / am : 0.0f);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inv));
    const __m256i total = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    // packs work within 128-bit lanes; the permute restores element order.
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    const __m256i ordered = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + b * kQ8Block), ordered);
    d[b] = am / 127.0f;
    const int sum = hsum256_epi32(total), first = hsum256_epi32(_mm256_add_epi32(q[0], q[1]));
    sums[2 * b] = static_cast<int16_t>(first);
    sums[2 * b + 1] = static_cast<int16_t>(sum - first);
  }
}

void gemm_packed(QuantType type, const uint8_t* w, size_t n_rows, size_t cols, const Q8Activations& x,
                 size_t t0, size_t n_tok, float* y, size_t y_stride) {
  gemm_packed_impl<PackedAvx2>(type, w, n_rows, cols, x, t0, n_tok, y, y_stride);
}

namespace {

// NB blocks of dot_i8_pairs side by side (2 * NB accumulator chains), written to out[0 .. NB * kF16Block).
template <int NB>
void dot_i8_pair_run(const int8_t* k, size_t block_stride, const float* scales, const int16_t* q,
                     float q_scale, size_t n, float* out) {
  static_assert(kF16Block == 16);  // a block's rows: two halves of 8
  __m256i acc[NB][2];
  for (int b = 0; b < NB; ++b) acc[b][0] = acc[b][1] = _mm256_setzero_si256();
  for (size_t x = 0; x < n; x += 2) {
    int32_t pair;  // q[x], q[x + 1] in every 32-bit lane, as the codes' pairs lie
    std::memcpy(&pair, q + x, sizeof pair);
    const __m256i qp = _mm256_set1_epi32(pair);
    for (int b = 0; b < NB; ++b) {
      const int8_t* codes = k + b * block_stride + x * kF16Block;  // 8 rows' pairs, then the next 8
      for (int h = 0; h < 2; ++h) {
        const __m256i c =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + 16 * h)));
        acc[b][h] = _mm256_add_epi32(acc[b][h], _mm256_madd_epi16(c, qp));
      }
    }
  }
  const __m256 qs = _mm256_set1_ps(q_scale);
  for (int b = 0; b < NB; ++b)
    for (int h = 0; h < 2; ++h) {
      const size_t at = b * kF16Block + 8 * h;
      const __m256 scale = _mm256_mul_ps(_mm256_loadu_ps(scales + at), qs);
      _mm256_storeu_ps(out + at, _mm256_mul_ps(_mm256_cvtepi32_ps(acc[b][h]), scale));
    }
}

}  // namespace

void dot_i8_pairs(const int8_t* k, size_t block_stride, const float* scales, size_t n_rows, const int16_t* q,
                  float q_scale, size_t n, float* out) {
  for_block_runs<4>(n_rows, out, [&]<int NB>(size_t b, float* y) {
    dot_i8_pair_run<NB>(k + b * block_stride, block_stride, scales + b * kF16Block, q, q_scale, n, y);
  });
}

}  // namespace ts::avx2
