#pragma once
// Integer products of packed weight groups (kernels/packed_rows.h) with 8-bit activations, written
// once for the AVX2 and AVX-512 units (internal linkage: see kernels/x86_helpers.h). V is the
// unit's vector of kRows int32/float lanes, one per weight row: 16 (a whole group) for AVX-512,
// 8 (half a group per pass) for AVX2. Every instruction works on all rows at once, so a tile of
// kRows rows x TB tokens ends in plain vector stores.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>

#include "kernels/packed_rows.h"
#include "kernels/q8_activations.h"

namespace ts {
namespace {

// Distance of the software prefetch (bytes of the packed stream ahead of the block in use).
constexpr size_t kPrefetchAhead = 2048;

template <class V, QuantType T, int TB>
void packed_tile(const uint8_t* group, size_t n_blocks, size_t lane0, const Q8Activations& x, size_t t0,
                 float* y, size_t y_stride, size_t n_rows) {
  using F = typename V::F;
  using I = typename V::I;
  constexpr bool kQ8 = T == QuantType::Q8_0, kMin = T == QuantType::Q4_1;
  constexpr size_t kBytes = packed_block_bytes(T), kCodesAt = kMin ? 64 : 32;
  // Offset per unit of s = d_x * sum(q_x): the minimum (Q4_1), -8 d (Q4_0), or -bias d where the
  // unit's signed product adds a bias to every weight (Q8_0).
  constexpr bool kOffset = !kQ8 || V::kSignedBias != 0;
  constexpr float kOffsetPerD = kQ8 ? -static_cast<float>(V::kSignedBias) : -8.0f;
  F acc[TB];
  for (int t = 0; t < TB; ++t) acc[t] = V::zero();
  for (size_t b = 0; b < n_blocks; ++b) {
    const uint8_t* p = group + b * kBytes;
    // Hardware prefetchers see one stream per thread; asking ahead keeps more lines in flight.
    for (size_t line = 0; line < kBytes; line += 64)
      _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchAhead + line), _MM_HINT_T0);
    const uint8_t* codes = p + kCodesAt + 4 * lane0;
    I isum[TB];
    for (int t = 0; t < TB; ++t) isum[t] = V::izero();
    if constexpr (kQ8) {
      for (size_t s = 0; s < 8; ++s) {
        const I w = V::load(codes + 64 * s);
        for (int t = 0; t < TB; ++t)
          isum[t] = V::dot_signed(isum[t], w, x.row_qs(t0 + t) + b * kQ8Block + 4 * s);
      }
    } else {
      for (size_t k = 0; k < 4; ++k) {
        const I raw = V::load(codes + 64 * k);
        const I lo = V::low_nibbles(raw), hi = V::high_nibbles(raw);
        for (int t = 0; t < TB; ++t) {
          const int8_t* xq = x.row_qs(t0 + t) + b * kQ8Block + 4 * k;
          isum[t] = V::dot_unsigned(V::dot_unsigned(isum[t], lo, xq), hi, xq + 16);
        }
      }
    }
    const F d = V::halves(p + 2 * lane0);
    F offset = V::zero();
    if constexpr (kMin) {
      offset = V::halves(p + 32 + 2 * lane0);
    } else if constexpr (kOffset) {
      offset = V::mul(d, V::set1(kOffsetPerD));
    }
    for (int t = 0; t < TB; ++t) {
      acc[t] = V::fmadd(V::cvt(isum[t]), V::mul(d, V::set1(x.row_d(t0 + t)[b])), acc[t]);
      if constexpr (kOffset) acc[t] = V::fmadd(offset, V::set1(x.row_s(t0 + t)[b]), acc[t]);
    }
  }
  for (int t = 0; t < TB; ++t) V::store(y + t * y_stride, acc[t], n_rows);
}

// Rows 0..n_rows of packed groups starting at w, tokens t0..t0+n_tok of x; y[t * y_stride + r].
template <class V, QuantType T>
void gemm_packed_type(const uint8_t* w, size_t n_rows, size_t cols, const Q8Activations& x, size_t t0,
                      size_t n_tok, float* y, size_t y_stride) {
  const size_t n_blocks = cols / kQ8Block, group_bytes = packed_group_bytes(T, cols);
  for (size_t r0 = 0; r0 < n_rows; r0 += V::kRows) {
    const uint8_t* group = w + r0 / kPackRows * group_bytes;
    const size_t lane0 = r0 % kPackRows, rows = std::min<size_t>(V::kRows, n_rows - r0);
    size_t t = 0;
    for (; t + V::kTokens <= n_tok; t += V::kTokens)
      packed_tile<V, T, V::kTokens>(group, n_blocks, lane0, x, t0 + t, y + t * y_stride + r0, y_stride, rows);
    for (; t < n_tok; ++t)
      packed_tile<V, T, 1>(group, n_blocks, lane0, x, t0 + t, y + t * y_stride + r0, y_stride, rows);
  }
}

template <class V>
void gemm_packed_impl(QuantType type, const uint8_t* w, size_t n_rows, size_t cols, const Q8Activations& x,
                      size_t t0, size_t n_tok, float* y, size_t y_stride) {
  switch (type) {
    case QuantType::Q4_0:
      return gemm_packed_type<V, QuantType::Q4_0>(w, n_rows, cols, x, t0, n_tok, y, y_stride);
    case QuantType::Q4_1:
      return gemm_packed_type<V, QuantType::Q4_1>(w, n_rows, cols, x, t0, n_tok, y, y_stride);
    default:
      return gemm_packed_type<V, QuantType::Q8_0>(w, n_rows, cols, x, t0, n_tok, y, y_stride);
  }
}

}  // namespace
}  // namespace ts
