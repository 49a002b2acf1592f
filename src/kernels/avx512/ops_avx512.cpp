// AVX-512 versions of SimdOps.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/block_runs.h"
#include "kernels/compress_kernels.h"
#include "kernels/kv_codes.h"
#include "kernels/q8_activations.h"
#include "kernels/quant_dot_tables.h"
#include "kernels/quant_types.h"
#include "kernels/simd_ops.h"
#include "kernels/x86_helpers.h"

namespace ts {
namespace {

struct VecAvx512 {
  using Reg = __m512;
  static constexpr size_t kWidth = 16;
  static constexpr int kTokenBlock = 4;  // 32 zmm registers: 4x4 accumulators + loads fit
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg set1(float a) { return _mm512_set1_ps(a); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static Reg load_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  // 16 bytes (one KV code each) as floats.
  static void u8x16_floats(__m128i x, Reg* out) { out[0] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(x)); }
  static void store_f16(uint16_t* p, Reg v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm512_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg div(Reg a, Reg b) { return _mm512_div_ps(a, b); }
  static Reg swap_pairs(Reg a) { return _mm512_permute_ps(a, 0xB1); }
  static Reg max(Reg a, Reg b) { return _mm512_max_ps(a, b); }
  static Reg min(Reg a, Reg b) { return _mm512_min_ps(a, b); }
  static Reg round(Reg a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static Reg pow2(Reg n) { return _mm512_scalef_ps(_mm512_set1_ps(1.0f), n); }
  static float reduce(Reg v) { return _mm512_reduce_add_ps(v); }
  // Lane i = the sum of the 16 floats at rows + 16 * i.
  static Reg row_sums(const float* rows) {
    alignas(64) float sums[kWidth];
    for (size_t i = 0; i < kWidth; ++i) sums[i] = reduce(load(rows + i * kWidth));
    return _mm512_load_ps(sums);
  }
  static void store_bf16(uint16_t* p, Reg v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
  }
  // vdpbf16ps: each float lane adds the products of one pair of BF16 weights and activations.
  struct Bf16Products {
    using Elem = uint16_t;
    using XReg = __m512bh;
    static constexpr size_t kStep = 32;
    static XReg load_x(const uint16_t* p) { return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p)); }
    static Reg madd(Reg acc, const uint16_t* w, XReg x) {
      return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(_mm512_loadu_si512(w)), x);
    }
    static float product(uint16_t w, uint16_t x) { return bf16_to_float(w) * bf16_to_float(x); }
  };
};

struct QuantKernels {
  static constexpr auto quantize_q8 = avx512::quantize_q8;
  static constexpr auto gemm_packed = avx512::gemm_packed;
  static constexpr auto dot_i8_pairs = avx512::dot_i8_pairs;
  static constexpr auto compress_range = avx512::compress_range;
};

#include "kernels/simd_generic.inc"

}  // namespace

const SimdOps& avx512_ops() {
  static const SimdOps table = make_ops<VecAvx512, QuantKernels>("avx512");
  return table;
}

}  // namespace ts
