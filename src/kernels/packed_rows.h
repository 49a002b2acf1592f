#pragma once
// Weight rows of every block type interleaved in groups of 16 at load time (as llama.cpp's
// repacked CPU buffers): one vector instruction multiplies 4 codes of each of 8 (AVX2) or 16
// (AVX-512) rows by the same 4 broadcast activations, so the int32 lanes are the rows' sums with
// no horizontal reductions, and the fp16 scales of 16 rows convert in one instruction.
//
// The CPU side of a type is one row of kPackedForms (ggml's type traits are the model): how its
// codes, scales and minimums sit in the packed layout. Every block type is seen as unsigned codes
// u with value  a_g * (u - code_offset) + b_g  per group g of 16 or 32 elements (Q8_0 as signed
// bytes with a = d). Adding a type is one row here, its unpacking in pack_rows (quant_codes.cpp)
// and nothing in the kernels, which read only the row.
//
// A group of 16 rows (the last one padded with zero rows) is a sequence of packed blocks, one per
// source block (32 columns, or 256 for the k-quants):
//   d[16]     fp16 scales of the 16 rows (k-quants: the super-block's d)
//   m[16]     fp16 minimums (Q4_1, Q5_1) or the super-block's dmin (Q2_K, Q4_K, Q5_K)
//   units     one per 32 columns, each:
//     sc[groups][16]  integer group scales, k-quants only (int8 or uint8: a_g = d * sc)
//     mn[groups][16]  integer group minimums, k-quants with a minimum (b_g = -dmin * mn)
//     codes     low bits of 32 codes of 16 rows, in 64-byte vectors whose bytes 4r..4r+3 belong to
//               row r:  nibbles: 4 vectors, vector k holds elements 4k..4k+3 in the low nibbles
//               and 16+4k..16+4k+3 in the high ones;  2-bit fields: 2 vectors (elements 0..15,
//               then 16..31), field k of byte 4r+i is element 4k+i of that half;  bytes (Q8_0):
//               8 vectors, vector s holds elements 4s..4s+3 as int8.
//     high      bit planes above the low bits, 64 bytes per bit: one bit per element (Q5_*, Q3_K):
//               bit k of byte 4r+i is element 4k+i, bit 4+k element 16+4k+i; two bits (Q6_K): one
//               vector per half, field k of byte 4r+i is element 4k+i of that half.
#include <cstddef>
#include <cstdint>

#include "kernels/quant_types.h"

namespace ts {

inline constexpr size_t kPackRows = 16;
inline constexpr size_t kPackCols = 32;  // columns per unit (one activation block)

struct PackedForm {
  QuantType type;
  uint8_t low_bits = 0;     // 4 (nibble vectors), 2 (2-bit fields), 8 (signed bytes); 0: not packed
  uint8_t high_bits = 0;    // bit planes above the low bits: 0, 1 or 2
  uint8_t group_elems = 0;  // elements sharing a scale: 16 or 32
  int16_t code_offset = 0;  // c in a * (u - c) + b
  bool has_min = false;     // b stored (else b = 0)
  bool k_quant = false;     // fp16 d (and dmin) per 256 columns, integer scales per group
  bool signed_scales = false;

  constexpr bool packed() const { return low_bits != 0; }
  constexpr size_t block_cols() const { return k_quant ? 256 : kPackCols; }
  constexpr size_t groups_per_unit() const { return kPackCols / group_elems; }
  constexpr size_t header_bytes() const { return (has_min ? 2 : 1) * 2 * kPackRows; }
  constexpr size_t scale_bytes() const { return k_quant ? (has_min ? 2 : 1) * groups_per_unit() * kPackRows : 0; }
  constexpr size_t code_bytes() const { return low_bits * 64 + high_bits * 64; }
  constexpr size_t unit_bytes() const { return scale_bytes() + code_bytes(); }
  constexpr size_t block_bytes() const { return header_bytes() + block_cols() / kPackCols * unit_bytes(); }
};

inline constexpr PackedForm kPackedForms[] = {
    // type           low high group  c     min    k-quant signed-scales
    {QuantType::Q4_0, 4, 0, 32, 8, false, false, false},
    {QuantType::Q4_1, 4, 0, 32, 0, true, false, false},
    {QuantType::Q5_0, 4, 1, 32, 16, false, false, false},
    {QuantType::Q5_1, 4, 1, 32, 0, true, false, false},
    {QuantType::Q8_0, 8, 0, 32, 0, false, false, false},
    {QuantType::Q2_K, 2, 0, 16, 0, true, true, false},
    {QuantType::Q3_K, 2, 1, 16, 4, false, true, true},
    {QuantType::Q4_K, 4, 0, 32, 0, true, true, false},
    {QuantType::Q5_K, 4, 1, 32, 0, true, true, false},
    {QuantType::Q6_K, 4, 2, 16, 32, false, true, true},
};

// The row of a type; packed() is false for the float types.
constexpr PackedForm packed_form(QuantType type) {
  for (const PackedForm& f : kPackedForms)
    if (f.type == type) return f;
  return PackedForm{type};
}
constexpr bool packable(QuantType type) { return packed_form(type).packed(); }

// Bytes of one group of 16 rows of `cols` columns, and of `rows` rows.
constexpr size_t packed_group_bytes(QuantType type, size_t cols) {
  const PackedForm f = packed_form(type);
  return cols / f.block_cols() * f.block_bytes();
}
constexpr size_t packed_bytes(QuantType type, size_t rows, size_t cols) {
  return (rows + kPackRows - 1) / kPackRows * packed_group_bytes(type, cols);
}

// Packs `rows` stored rows of `cols` elements (row-major blocks at src) into dst
// (packed_bytes(type, rows, cols) bytes).
void pack_rows(QuantType type, const uint8_t* src, size_t rows, size_t cols, uint8_t* dst);

// The codes u of one unit (32 columns) of row `lane` of a packed group, read back element by element:
// the scalar reference of the SIMD unpacking (int8 values for Q8_0).
void unit_codes(const PackedForm& f, const uint8_t* unit, size_t lane, int* u);

}  // namespace ts
