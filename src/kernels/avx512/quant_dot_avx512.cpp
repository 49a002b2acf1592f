// AVX-512 (VNNI) activation quantization and packed integer products: one vpdpbusd multiplies 4
// codes of each of 16 rows by 4 broadcast activations.
#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "kernels/block_runs.h"
#include "kernels/packed_gemm_x86.h"
#include "kernels/quant_dot_tables.h"
#include "kernels/simd_ops.h"
#include "kernels/x86_helpers.h"

namespace ts::avx512 {
namespace {

// Packed groups (packed_gemm_x86.h): one zmm lane per row of a 16-row group.
struct PackedVnni {
  using F = __m512;
  using I = __m512i;
  static constexpr size_t kRows = 16;
  static constexpr int kTokens = 8;         // 8 float + 8 int accumulators, codes and scales: 32 zmm
  static constexpr int kSignedBias = 128;   // vpdpbusd wants unsigned weights: w ^ 0x80 = w + 128
  static constexpr bool kPairSums = false;  // vpdpbusd sums into int32 directly
  static F zero() { return _mm512_setzero_ps(); }
  static I iset1(int a) { return _mm512_set1_epi32(a); }
  static I isub(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I izero() { return _mm512_setzero_si512(); }
  static F set1(float a) { return _mm512_set1_ps(a); }
  static I load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static F halves(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static I srl(I v, int n) { return _mm512_srl_epi16(v, _mm_cvtsi32_si128(n)); }
  static I sll(I v, int n) { return _mm512_sll_epi16(v, _mm_cvtsi32_si128(n)); }
  static I and_bytes(I v, int mask) { return _mm512_and_si512(v, _mm512_set1_epi8(static_cast<char>(mask))); }
  static I or_(I a, I b) { return _mm512_or_si512(a, b); }
  // kRows scale bytes of a k-quant unit as floats.
  static F u8_to_f(const uint8_t* p) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(load16(p))); }
  static F i8_to_f(const uint8_t* p) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load16(p))); }
  static __m128i load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
  static I broadcast4(const int8_t* x) {
    int32_t v;
    std::memcpy(&v, x, 4);
    return _mm512_set1_epi32(v);
  }
  static I dot_unsigned(I acc, I u, const int8_t* x) { return _mm512_dpbusd_epi32(acc, u, broadcast4(x)); }
  static I dot_signed(I acc, I w, const int8_t* x) {
    return _mm512_dpbusd_epi32(acc, _mm512_xor_si512(w, _mm512_set1_epi8(static_cast<char>(0x80))),
                               broadcast4(x));
  }
  static F cvt(I v) { return _mm512_cvtepi32_ps(v); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fnmadd(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
  static void store(float* y, F v, size_t n) {
    _mm512_mask_storeu_ps(y, static_cast<__mmask16>((1u << n) - 1), v);
  }
};

}  // namespace

void quantize_q8(const float* x, size_t n, int8_t* qs, float* d, int16_t* sums) {
  for (size_t b = 0; b < n / kQ8Block; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + b * kQ8Block), v1 = _mm512_loadu_ps(x + b * kQ8Block + 16);
    const float am = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const __m512 inv = _mm512_set1_ps(am > 0 ? 127.0f / am : 0.0f);
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, inv)),
                  q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, inv));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + b * kQ8Block), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + b * kQ8Block + 16), _mm512_cvtepi32_epi8(q1));
    d[b] = am / 127.0f;
    const int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1)), first = _mm512_reduce_add_epi32(q0);
    sums[2 * b] = static_cast<int16_t>(first);
    sums[2 * b + 1] = static_cast<int16_t>(sum - first);
  }
}

void gemm_packed(QuantType type, const uint8_t* w, size_t n_rows, size_t cols, const Q8Activations& x,
                 size_t t0, size_t n_tok, float* y, size_t y_stride) {
  gemm_packed_impl<PackedVnni>(type, w, n_rows, cols, x, t0, n_tok, y, y_stride);
}

namespace {

// NB blocks of dot_i8_pairs side by side, one zmm accumulator (16 rows) each.
template <int NB>
void dot_i8_pair_run(const int8_t* k, size_t block_stride, const float* scales, const int16_t* q,
                     float q_scale, size_t n, float* out) {
  static_assert(kF16Block == 16);
  __m512i acc[NB];
  for (int b = 0; b < NB; ++b) acc[b] = _mm512_setzero_si512();
  for (size_t x = 0; x < n; x += 2) {
    int32_t pair;  // q[x], q[x + 1] in every 32-bit lane, as the codes' pairs lie
    std::memcpy(&pair, q + x, sizeof pair);
    const __m512i qp = _mm512_set1_epi32(pair);
    for (int b = 0; b < NB; ++b) {
      const __m512i c = _mm512_cvtepi8_epi16(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + b * block_stride + x * kF16Block)));
      acc[b] = _mm512_add_epi32(acc[b], _mm512_madd_epi16(c, qp));
    }
  }
  const __m512 qs = _mm512_set1_ps(q_scale);
  for (int b = 0; b < NB; ++b) {
    const __m512 scale = _mm512_mul_ps(_mm512_loadu_ps(scales + b * kF16Block), qs);
    _mm512_storeu_ps(out + b * kF16Block, _mm512_mul_ps(_mm512_cvtepi32_ps(acc[b]), scale));
  }
}

}  // namespace

void dot_i8_pairs(const int8_t* k, size_t block_stride, const float* scales, size_t n_rows, const int16_t* q,
                  float q_scale, size_t n, float* out) {
  for_block_runs<8>(n_rows, out, [&]<int NB>(size_t b, float* y) {
    dot_i8_pair_run<NB>(k + b * block_stride, block_stride, scales + b * kF16Block, q, q_scale, n, y);
  });
}

}  // namespace ts::avx512
