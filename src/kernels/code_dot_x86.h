#pragma once
// Dot products of blocks in the code form (kernels/quant_codes.h: Q5_0/Q5_1, Q2_K..Q6_K) with 8-bit
// activations, shared by the AVX2 and AVX-512 units (internal linkage: see kernels/x86_helpers.h).
// Each 32-value slice of a block is unpacked to 32 unsigned codes in one register; IntDot is the
// unit's u8 x s8 product giving eight int32 sums, lane i over bytes 4i..4i+3, so lanes 0-3 and 4-7
// are the slice's two groups of 16.
#include <immintrin.h>

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "kernels/q8_activations.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_codes.h"
#include "kernels/x86_helpers.h"

namespace ts {
namespace {

// (byte >> shift) & mask for the 32 bytes at p; the 16-bit shift pulls in bits of the neighbouring
// byte, which the mask drops.
inline __m256i code_field(const uint8_t* p, int shift, int mask) {
  const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm256_and_si256(_mm256_srl_epi16(raw, _mm_cvtsi32_si128(shift)),
                          _mm256_set1_epi8(static_cast<char>(mask)));
}

// Byte j is 0xFF where bit j of the little-endian 32-bit word at p is set.
inline __m256i bits_to_bytes(const uint8_t* p) {
  uint32_t word;
  std::memcpy(&word, p, 4);
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(word)),
                          _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

template <QuantType T>
using CodeBlock = std::conditional_t<
    T == QuantType::Q5_0, BlockQ5_0,
    std::conditional_t<
        T == QuantType::Q5_1, BlockQ5_1,
        std::conditional_t<
            T == QuantType::Q2_K, BlockQ2_K,
            std::conditional_t<
                T == QuantType::Q3_K, BlockQ3_K,
                std::conditional_t<T == QuantType::Q4_K, BlockQ4_K,
                                   std::conditional_t<T == QuantType::Q5_K, BlockQ5_K, BlockQ6_K>>>>>>;

// The codes of values 32k..32k+31 of one block (the SIMD form of block_codes).
template <QuantType T>
__m256i unpack_codes(const uint8_t* p, int k) {
  using B = CodeBlock<T>;
  if constexpr (T == QuantType::Q5_0 || T == QuantType::Q5_1) {
    const __m256i high = _mm256_and_si256(bits_to_bytes(p + offsetof(B, qh)), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(unpack_q4_block(p + offsetof(B, qs)), high);
  } else if constexpr (T == QuantType::Q2_K || T == QuantType::Q3_K) {
    const __m256i low = code_field(p + offsetof(B, qs) + (k / 4) * 32, 2 * (k % 4), 3);
    if constexpr (T == QuantType::Q2_K)
      return low;
    else
      return _mm256_or_si256(low, _mm256_slli_epi16(code_field(p + offsetof(B, hmask), k, 1), 2));
  } else if constexpr (T == QuantType::Q4_K || T == QuantType::Q5_K) {
    const __m256i low = code_field(p + offsetof(B, qs) + (k / 2) * 32, 4 * (k % 2), 0xF);
    if constexpr (T == QuantType::Q4_K)
      return low;
    else
      return _mm256_or_si256(low, _mm256_slli_epi16(code_field(p + offsetof(B, qh), k, 1), 4));
  } else {  // Q6_K
    const __m256i low = code_field(p + offsetof(B, ql) + (k / 4) * 64 + (k % 2) * 32, 4 * ((k % 4) / 2), 0xF);
    const __m256i high = code_field(p + offsetof(B, qh) + (k / 4) * 32, 2 * (k % 4), 3);
    return _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
  }
}

// a, b per group of 16 (quant_codes.h); the one-block Q5 types inline, the k-quants (one call per
// 256 values) through the shared scalar routine.
template <QuantType T>
void group_scales(const uint8_t* p, float* a, float* b) {
  if constexpr (T == QuantType::Q5_0 || T == QuantType::Q5_1) {
    const auto& blk = *reinterpret_cast<const CodeBlock<T>*>(p);
    a[0] = a[1] = half(blk.d);
    if constexpr (T == QuantType::Q5_1) b[0] = b[1] = half(blk.m);
  } else {
    block_group_scales(T, p, a, b);
  }
}

template <QuantType T, class IntDot>
float dot_code_form(const uint8_t* w, const Q8Row& x, size_t n_blocks) {
  using B = CodeBlock<T>;
  constexpr int kSlices =
      T == QuantType::Q5_0 || T == QuantType::Q5_1 ? 1 : static_cast<int>(kQK_K / kQ8Block);
  constexpr int kOffset = code_offset(T);
  const __m256i ones = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  float a[kCodeGroup], b[kCodeGroup] = {};
  for (size_t blk = 0; blk < n_blocks / kSlices; ++blk) {
    const uint8_t* p = w + blk * sizeof(B);
    group_scales<T>(p, a, b);
    for (int k = 0; k < kSlices; ++k) {
      const size_t xb = blk * kSlices + static_cast<size_t>(k);
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + xb * kQ8Block));
      __m256i isum = IntDot::dot(unpack_codes<T>(p, k), xq);
      const __m256i xsum = IntDot::dot(ones, xq);
      if constexpr (kOffset != 0)
        isum = _mm256_sub_epi32(isum, _mm256_mullo_epi32(xsum, _mm256_set1_epi32(kOffset)));
      const __m256 dx = _mm256_set1_ps(x.d[xb]);
      const __m256 av = _mm256_set_m128(_mm_set1_ps(a[2 * k + 1]), _mm_set1_ps(a[2 * k]));
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(av, dx), acc);
      if constexpr (kOffset == 0) {
        const __m256 bv = _mm256_set_m128(_mm_set1_ps(b[2 * k + 1]), _mm_set1_ps(b[2 * k]));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(xsum), _mm256_mul_ps(bv, dx), acc);
      }
    }
  }
  return hsum256(acc);
}

// Dispatch over the code-form types; 0 for others (the callers handle Q4_0/Q4_1/Q8_0 themselves).
template <class IntDot>
float dot_code_form(QuantType type, const uint8_t* w, const Q8Row& x, size_t n_blocks) {
  switch (type) {
    case QuantType::Q5_0:
      return dot_code_form<QuantType::Q5_0, IntDot>(w, x, n_blocks);
    case QuantType::Q5_1:
      return dot_code_form<QuantType::Q5_1, IntDot>(w, x, n_blocks);
    case QuantType::Q2_K:
      return dot_code_form<QuantType::Q2_K, IntDot>(w, x, n_blocks);
    case QuantType::Q3_K:
      return dot_code_form<QuantType::Q3_K, IntDot>(w, x, n_blocks);
    case QuantType::Q4_K:
      return dot_code_form<QuantType::Q4_K, IntDot>(w, x, n_blocks);
    case QuantType::Q5_K:
      return dot_code_form<QuantType::Q5_K, IntDot>(w, x, n_blocks);
    case QuantType::Q6_K:
      return dot_code_form<QuantType::Q6_K, IntDot>(w, x, n_blocks);
    default:
      return 0.0f;
  }
}

}  // namespace
}  // namespace ts
