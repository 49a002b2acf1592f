#pragma once
// The integer form in which the packed kernels see every block type (kernels/packed_rows.h): a
// block's values are x = a_g * (u - c) + b_g with unsigned codes u (at most 6 bits, so u8 x s8
// products never saturate; Q8_0 keeps its signed bytes), a constant code offset c per type, and
// per group g of 16 or 32 values a_g = d * sc_g, b_g = -dmin * mn_g for the k-quants, a = d and
// b = m for the legacy types. Against 8-bit activations q with block scale d_x, a group then
// contributes  d_x * (a_g * (sum u*q - c * sum q) + b_g * sum q),  whose sums are exact integers.
// These are the scalar readers of the GGUF blocks that pack_rows uses.
#include <cstddef>
#include <cstdint>

#include "kernels/quant_types.h"

namespace ts {

// One source block's scale fields: fp16 bit patterns d and m (the minimum, or the k-quants' dmin;
// 0 where the type has none) and, for the k-quants, the integer scale and minimum of each group.
struct BlockFields {
  uint16_t d = 0, m = 0;
  int sc[16] = {}, mn[16] = {};
};
BlockFields block_fields(QuantType type, const uint8_t* block);

// The codes u of one block (block_elems values; Q8_0's int8 values as they are).
void block_codes(QuantType type, const uint8_t* block, int* u);

}  // namespace ts
