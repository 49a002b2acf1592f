// AVX-512 (VNNI) activation quantization and integer dot products: two 32-value blocks per
// 512-bit vpdpbusd, one block with the 256-bit form for an odd tail.
#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "kernels/avx512/avx512_helpers.h"
#include "kernels/code_dot_x86.h"
#include "kernels/packed_gemm_x86.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_dot_tables.h"
#include "kernels/x86_helpers.h"

namespace ts::avx512 {
namespace {

template <class Block, bool kHasMin>
float dot_q4(const uint8_t* w, const Q8Row& x, size_t n_blocks) {
  const auto* blocks = reinterpret_cast<const Block*>(w);
  __m512 acc = _mm512_setzero_ps();
  float offset = 0.0f;
  size_t b = 0;
  for (; b + 2 <= n_blocks; b += 2) {
    const __m512i xq = _mm512_loadu_si512(x.qs + b * kQ8Block);
    const __m512i sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(),
                                            load_two_q4<sizeof(Block), offsetof(Block, qs)>(&blocks[b]), xq);
    const float d0 = half(blocks[b].d), d1 = half(blocks[b + 1].d);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), two_scales(d0 * x.d[b], d1 * x.d[b + 1]), acc);
    if constexpr (kHasMin) {
      offset += half(blocks[b].m) * x.s[b] + half(blocks[b + 1].m) * x.s[b + 1];
    } else {
      offset -= 8.0f * (d0 * x.s[b] + d1 * x.s[b + 1]);
    }
  }
  float total = _mm512_reduce_add_ps(acc) + offset;
  if (b < n_blocks) {
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + b * kQ8Block));
    const __m256i sum = _mm256_dpbusd_epi32(_mm256_setzero_si256(), unpack_q4_block(blocks[b].qs), xq);
    const float dw = half(blocks[b].d);
    total += dw * x.d[b] * hsum256(_mm256_cvtepi32_ps(sum));
    if constexpr (kHasMin) {
      total += half(blocks[b].m) * x.s[b];
    } else {
      total -= 8.0f * dw * x.s[b];
    }
  }
  return total;
}

float q8_0_dot(const uint8_t* w, const Q8Row& x, size_t n_blocks) {
  const auto* blocks = reinterpret_cast<const BlockQ8_0*>(w);
  __m256 acc = _mm256_setzero_ps();
  for (size_t b = 0; b < n_blocks; ++b) {
    const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks[b].qs));
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + b * kQ8Block));
    // vpdpbusd needs an unsigned operand: |w| times x carrying w's sign.
    const __m256i xs = _mm256_mask_sub_epi8(xq, _mm256_movepi8_mask(wq), _mm256_setzero_si256(), xq);
    const __m256i sum = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(wq), xs);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(half(blocks[b].d) * x.d[b]), acc);
  }
  return hsum256(acc);
}

// Packed groups (packed_gemm_x86.h): one zmm lane per row of a 16-row group.
struct PackedVnni {
  using F = __m512;
  using I = __m512i;
  static constexpr size_t kRows = 16;
  static constexpr int kTokens = 8;        // 8 float + 8 int accumulators, codes and scales: 32 zmm
  static constexpr int kSignedBias = 128;  // vpdpbusd wants unsigned weights: w ^ 0x80 = w + 128
  static F zero() { return _mm512_setzero_ps(); }
  static I izero() { return _mm512_setzero_si512(); }
  static F set1(float a) { return _mm512_set1_ps(a); }
  static I load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static F halves(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static I low_nibbles(I v) { return _mm512_and_si512(v, _mm512_set1_epi8(0x0F)); }
  static I high_nibbles(I v) { return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F)); }
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
  static void store(float* y, F v, size_t n) {
    _mm512_mask_storeu_ps(y, static_cast<__mmask16>((1u << n) - 1), v);
  }
};

// The u8 x s8 product of the code-form kernels: VNNI on 256-bit registers.
struct VnniIntDot {
  static __m256i dot(__m256i u, __m256i x) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, x); }
};

}  // namespace

void quantize_q8(const float* x, size_t n, int8_t* qs, float* d, float* s) {
  for (size_t b = 0; b < n / kQ8Block; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + b * kQ8Block), v1 = _mm512_loadu_ps(x + b * kQ8Block + 16);
    const float am = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const __m512 inv = _mm512_set1_ps(am > 0 ? 127.0f / am : 0.0f);
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, inv)),
                  q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, inv));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + b * kQ8Block), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + b * kQ8Block + 16), _mm512_cvtepi32_epi8(q1));
    d[b] = am / 127.0f;
    s[b] = d[b] * static_cast<float>(_mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1)));
  }
}

float dot_q8(QuantType type, const uint8_t* w, const Q8Row& x, size_t n_blocks) {
  switch (type) {
    case QuantType::Q4_0:
      return dot_q4<BlockQ4_0, false>(w, x, n_blocks);
    case QuantType::Q4_1:
      return dot_q4<BlockQ4_1, true>(w, x, n_blocks);
    case QuantType::Q8_0:
      return q8_0_dot(w, x, n_blocks);
    default:
      return dot_code_form<VnniIntDot>(type, w, x, n_blocks);
  }
}

void gemm_packed(QuantType type, const uint8_t* w, size_t n_rows, size_t cols, const Q8Activations& x,
                 size_t t0, size_t n_tok, float* y, size_t y_stride) {
  gemm_packed_impl<PackedVnni>(type, w, n_rows, cols, x, t0, n_tok, y, y_stride);
}

void gemm_q8(QuantType type, const uint8_t* w, size_t row_stride, size_t n_rows, const Q8Activations& x,
             size_t t0, size_t n_tok, float* y, size_t y_stride) {
  gemm_by_dots<dot_q8>(type, w, row_stride, n_rows, x, t0, n_tok, y, y_stride);
}

}  // namespace ts::avx512
