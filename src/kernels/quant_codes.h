#pragma once
// The integer form in which the dot kernels see Q5_0/Q5_1 and the k-quants (Q2_K..Q6_K): a block's
// values are x = a_g * (u - c) + b_g, with unsigned codes u (at most 6 bits, so u8 x s8 products
// never saturate), a constant code offset c per type, and float a_g, b_g per group g of 16
// values. Against 8-bit activations q with block scale d_x, a group then contributes
//   d_x * (a_g * (sum u*q - c * sum q) + b_g * sum q),
// whose sums are exact integers; only the final scaling is float.
#include <cstddef>
#include <cstdint>

#include "kernels/quant_types.h"

namespace ts {

inline constexpr size_t kCodeGroup = 16;

// Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.
bool has_code_form(QuantType type);
// c: 16 for Q5_0, 4 for Q3_K, 32 for Q6_K, 0 for the types with a minimum (b, zero otherwise).
constexpr int code_offset(QuantType type) {
  return type == QuantType::Q5_0 ? 16 : type == QuantType::Q3_K ? 4 : type == QuantType::Q6_K ? 32 : 0;
}
// a and b of each group of 16 of one block (block_elems / 16 entries each).
void block_group_scales(QuantType type, const uint8_t* block, float* a, float* b);
// The codes u of one block (block_elems bytes): the scalar reference of the SIMD unpackers.
void block_codes(QuantType type, const uint8_t* block, uint8_t* u);

}  // namespace ts
