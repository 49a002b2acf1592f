// AVX2 + FMA + F16C versions of SimdOps.
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

struct VecAvx2 {
  using Reg = __m256;
  static constexpr size_t kWidth = 8;
  static constexpr int kTokenBlock = 2;  // 16 ymm registers: 4x2 accumulators + loads fit
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg set1(float a) { return _mm256_set1_ps(a); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static Reg load_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  // 16 bytes (one KV code each) as floats, in two vectors.
  static void u8x16_floats(__m128i x, Reg* out) {
    out[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(x));
    out[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(x, x)));
  }
  static void store_f16(uint16_t* p, Reg v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm256_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static Reg div(Reg a, Reg b) { return _mm256_div_ps(a, b); }
  static Reg swap_pairs(Reg a) { return _mm256_permute_ps(a, 0xB1); }
  static Reg max(Reg a, Reg b) { return _mm256_max_ps(a, b); }
  static Reg min(Reg a, Reg b) { return _mm256_min_ps(a, b); }
  static Reg round(Reg a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // 2^n for integer-valued n in the normal exponent range.
  static Reg pow2(Reg n) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
  }
  // Round to nearest even as float_to_bf16: add 0x7FFF plus the kept LSB, keep the high halves;
  // NaNs keep their high half, made quiet.
  static void store_bf16(uint16_t* p, Reg v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
    const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    const __m256i h =
        _mm256_blendv_epi8(rounded, nan, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
  }
  static Reg load_bf16(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  struct Bf16Products {
    using Elem = uint16_t;
    using XReg = Reg;
    static constexpr size_t kStep = kWidth;
    static XReg load_x(const uint16_t* p) { return load_bf16(p); }
    static Reg madd(Reg acc, const uint16_t* w, XReg x) { return _mm256_fmadd_ps(load_bf16(w), x, acc); }
    static float product(uint16_t w, uint16_t x) { return bf16_to_float(w) * bf16_to_float(x); }
  };
  // Lane i = the sum of the 8 floats at rows + 8 * i (one transposed horizontal sum for 8 rows).
  static Reg row_sums(const float* rows) { return row_sums_8x8(rows); }
  static float reduce(Reg v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

struct QuantKernels {
  static constexpr auto quantize_q8 = avx2::quantize_q8;
  static constexpr auto gemm_packed = avx2::gemm_packed;
  static constexpr auto dot_i8_pairs = avx2::dot_i8_pairs;
  static constexpr auto compress_range = avx2::compress_range;
};

#include "kernels/simd_generic.inc"

}  // namespace

const SimdOps& avx2_ops() {
  static const SimdOps table = make_ops<VecAvx2, QuantKernels>("avx2");
  return table;
}

}  // namespace ts
