#pragma once
// Integer products of packed weight groups (kernels/packed_rows.h) with 8-bit activations, written
// once for the AVX2 and AVX-512 units and for every packed type (internal linkage: see
// kernels/x86_helpers.h). V is the unit's vector of kRows int32/float lanes, one per weight row: 16
// (a whole group) for AVX-512, 8 (half a group per pass) for AVX2. Every instruction works on all
// rows at once, so a tile of kRows rows x TB tokens ends in plain vector stores. The type's
// PackedForm row decides, at compile time, how codes are unpacked and how groups are scaled.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <utility>

#include "kernels/packed_rows.h"
#include "kernels/q8_activations.h"

namespace ts {
namespace {

// Distance of the software prefetch (bytes of the packed stream ahead of the unit in use).
constexpr size_t kPrefetchAhead = 2048;

// ((v >> from) & mask) << to within each byte, in two instructions: the 16-bit shift carries bits
// across a byte boundary only below bit `to`, which the mask (mask << to) drops.
template <class V>
typename V::I move_field(typename V::I v, int from, int mask, int to) {
  const auto shifted = from >= to ? V::srl(v, from - to) : V::sll(v, to - from);
  return V::and_bytes(shifted, mask << to);
}

// Codes of elements 16h + 4k .. 16h + 4k + 3 of each row (k = 0..3), unsigned: low bits | high bits.
template <class V, PackedForm F>
typename V::I slice_codes(const uint8_t* codes, int h, int k) {
  using I = typename V::I;
  I low;
  if constexpr (F.low_bits == 4) {
    low = move_field<V>(V::load(codes + 64 * k), 4 * h, 0xF, 0);
  } else {
    low = move_field<V>(V::load(codes + 64 * h), 2 * k, 3, 0);
  }
  if constexpr (F.high_bits == 1) {
    return V::or_(low, move_field<V>(V::load(codes + 64 * F.low_bits), 4 * h + k, 1, F.low_bits));
  } else if constexpr (F.high_bits == 2) {
    return V::or_(low, move_field<V>(V::load(codes + 64 * F.low_bits + 64 * h), 2 * k, 3, F.low_bits));
  } else {
    return low;
  }
}

template <class V, QuantType T, int TB>
void packed_tile(const uint8_t* group, size_t n_blocks, size_t lane0, const Q8Activations& x, size_t t0,
                 float* y, size_t y_stride, size_t n_rows) {
  using F = typename V::F;
  using I = typename V::I;
  constexpr PackedForm P = packed_form(T);
  constexpr bool kQ8 = P.low_bits == 8;
  constexpr size_t kUnits = P.block_cols() / kPackCols, kGroups = P.groups_per_unit();
  // The code offset, plus the bias the unit's signed product adds to every Q8_0 weight: subtracted
  // from the integer sums as kOffset * sum q, exactly as the scalar reference does.
  constexpr int kOffset = P.code_offset + (kQ8 ? V::kSignedBias : 0);
  // Units whose product yields int16 pair sums (AVX2's maddubs) add that many slices in int16
  // before widening: a pair sum is at most 2 * max code * 127 and must stay below 2^15.
  constexpr int kMaxCode = (1 << (P.low_bits + P.high_bits)) - 1;
  constexpr int kInt16Slices = V::kPairSums && !kQ8 ? 32767 / (2 * kMaxCode * 127) : 0;
  F acc[TB];
  for (int t = 0; t < TB; ++t) acc[t] = V::zero();
  for (size_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = group + b * P.block_bytes();
    const F d = V::halves(block + 2 * lane0);
    F m = V::zero();
    if constexpr (P.has_min) m = V::halves(block + 2 * kPackRows + 2 * lane0);
    for (size_t k = 0; k < kUnits; ++k) {
      const uint8_t* unit = block + P.header_bytes() + k * P.unit_bytes();
      // Hardware prefetchers see one stream per thread; asking ahead keeps more lines in flight.
      for (size_t line = 0; line < P.unit_bytes(); line += 64)
        _mm_prefetch(reinterpret_cast<const char*>(unit + kPrefetchAhead + line), _MM_HINT_T0);
      const uint8_t* codes = unit + P.scale_bytes() + 4 * lane0;
      const size_t xb = b * kUnits + k;
      // a_g and b_g of each group, per row.
      F a[kGroups], bias[kGroups];
      for (size_t g = 0; g < kGroups; ++g) {
        if constexpr (P.k_quant) {
          const uint8_t* sc = unit + g * kPackRows + lane0;
          a[g] = V::mul(d, P.signed_scales ? V::i8_to_f(sc) : V::u8_to_f(sc));
          if constexpr (P.has_min)
            bias[g] = V::fnmadd(m, V::u8_to_f(unit + (kGroups + g) * kPackRows + lane0), V::zero());
        } else {
          a[g] = d;
          bias[g] = m;
        }
      }
      // One pass per group of 16 elements, or one over both halves for groups of 32.
      for (size_t g = 0; g < kGroups; ++g) {
        I isum[TB], sum16[TB];
        for (int t = 0; t < TB; ++t) isum[t] = sum16[t] = V::izero();
        int slices16 = 0;
        for (int h = static_cast<int>(g); h < (kGroups == 1 ? 2 : static_cast<int>(g) + 1); ++h)
          for (int s = 0; s < 4; ++s) {
            const size_t at = xb * kQ8Block + 16 * static_cast<size_t>(h) + 4 * static_cast<size_t>(s);
            if constexpr (kQ8) {
              const I w = V::load(codes + 64 * (4 * h + s));
              for (int t = 0; t < TB; ++t) isum[t] = V::dot_signed(isum[t], w, x.row_qs(t0 + t) + at);
            } else if constexpr (kInt16Slices > 0) {
              const I u = slice_codes<V, P>(codes, h, s);
              for (int t = 0; t < TB; ++t)
                sum16[t] = V::add16(sum16[t], V::pair_dot(u, x.row_qs(t0 + t) + at));
              if (++slices16 == kInt16Slices) {
                for (int t = 0; t < TB; ++t) isum[t] = V::widen_add(isum[t], sum16[t]), sum16[t] = V::izero();
                slices16 = 0;
              }
            } else {
              const I u = slice_codes<V, P>(codes, h, s);
              for (int t = 0; t < TB; ++t) isum[t] = V::dot_unsigned(isum[t], u, x.row_qs(t0 + t) + at);
            }
          }
        if constexpr (kInt16Slices > 0)
          if (slices16 > 0)
            for (int t = 0; t < TB; ++t) isum[t] = V::widen_add(isum[t], sum16[t]);
        for (int t = 0; t < TB; ++t) {
          // sum q over the group: the whole block, or one half of it.
          const int16_t* sums = x.row_sums(t0 + t) + 2 * xb;
          const int xsum = kGroups == 1 ? sums[0] + sums[1] : sums[g];
          if constexpr (kOffset != 0) isum[t] = V::isub(isum[t], V::iset1(kOffset * xsum));
          const float dx = x.row_d(t0 + t)[xb];
          acc[t] = V::fmadd(V::cvt(isum[t]), V::mul(a[g], V::set1(dx)), acc[t]);
          if constexpr (P.has_min) acc[t] = V::fmadd(bias[g], V::set1(dx * static_cast<float>(xsum)), acc[t]);
        }
      }
    }
  }
  for (int t = 0; t < TB; ++t) V::store(y + t * y_stride, acc[t], n_rows);
}

// packed_tile of 1..kTokens tokens: the last tokens of a product (a batch of a few decoding
// sequences, say) share each unpacked weight slice as a full tile's do. A token's sums do not
// depend on the tile's size, so its result does not depend on the other tokens.
using PackedTile = void (*)(const uint8_t*, size_t, size_t, const Q8Activations&, size_t, float*, size_t,
                            size_t);
template <class V, QuantType T, size_t... N>
constexpr std::array<PackedTile, sizeof...(N)> tile_kernels(std::index_sequence<N...>) {
  return {&packed_tile<V, T, static_cast<int>(N) + 1>...};
}
template <class V, QuantType T>
constexpr auto kTiles = tile_kernels<V, T>(std::make_index_sequence<V::kTokens>());

// Rows 0..n_rows of packed groups starting at w, tokens t0..t0+n_tok of x; y[t * y_stride + r].
template <class V, QuantType T>
void gemm_packed_type(const uint8_t* w, size_t n_rows, size_t cols, const Q8Activations& x, size_t t0,
                      size_t n_tok, float* y, size_t y_stride) {
  const size_t n_blocks = cols / packed_form(T).block_cols(), group_bytes = packed_group_bytes(T, cols);
  for (size_t r0 = 0; r0 < n_rows; r0 += V::kRows) {
    const uint8_t* group = w + r0 / kPackRows * group_bytes;
    const size_t lane0 = r0 % kPackRows, rows = std::min<size_t>(V::kRows, n_rows - r0);
    size_t t = 0;
    for (; t + V::kTokens <= n_tok; t += V::kTokens)
      packed_tile<V, T, V::kTokens>(group, n_blocks, lane0, x, t0 + t, y + t * y_stride + r0, y_stride, rows);
    if (t < n_tok)
      kTiles<V, T>[n_tok - t - 1](group, n_blocks, lane0, x, t0 + t, y + t * y_stride + r0, y_stride, rows);
  }
}

using PackedGemm = void (*)(const uint8_t*, size_t, size_t, const Q8Activations&, size_t, size_t, float*,
                            size_t);

// One kernel per row of kPackedForms, in the table's order.
template <class V, size_t... Row>
constexpr std::array<PackedGemm, sizeof...(Row)> packed_kernels(std::index_sequence<Row...>) {
  return {&gemm_packed_type<V, kPackedForms[Row].type>...};
}

template <class V>
void gemm_packed_impl(QuantType type, const uint8_t* w, size_t n_rows, size_t cols, const Q8Activations& x,
                      size_t t0, size_t n_tok, float* y, size_t y_stride) {
  constexpr size_t kTypes = std::size(kPackedForms);
  static constexpr auto kKernels = packed_kernels<V>(std::make_index_sequence<kTypes>());
  for (size_t i = 0; i < kTypes; ++i)
    if (kPackedForms[i].type == type) return kKernels[i](w, n_rows, cols, x, t0, n_tok, y, y_stride);
}

}  // namespace
}  // namespace ts
