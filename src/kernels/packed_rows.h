#pragma once
// Q4_0/Q4_1/Q8_0 weight rows interleaved in groups of 16 at load time (as llama.cpp's repacked
// CPU buffers), so that one 512-bit VNNI instruction multiplies 4 weights of each of 16 rows by
// the same 4 broadcast activations: the int32 lanes are the 16 rows' sums, with no horizontal
// reductions, and the fp16 scales of 16 rows convert in one instruction.
//
// A group of 16 rows (the last one padded with zero rows) is n_blocks consecutive packed blocks,
// one per 32 columns:
//   d[16]    fp16 scales of the 16 rows
//   m[16]    fp16 minimums (Q4_1 only)
//   codes    Q4: 4 x 64 bytes; bytes 4r..4r+3 of vector k are bytes 4k..4k+3 of row r's qs, whose
//            low nibbles are elements 4k..4k+3 and high nibbles elements 16+4k..16+4k+3.
//            Q8_0: 8 x 64 bytes; bytes 4r..4r+3 of vector s are row r's int8 elements 4s..4s+3.
#include <cstddef>
#include <cstdint>

#include "kernels/quant_types.h"

namespace ts {

inline constexpr size_t kPackRows = 16;

// Q4_0, Q4_1 and Q8_0.
bool packable(QuantType type);
// Bytes of one packed block (16 rows x 32 columns).
constexpr size_t packed_block_bytes(QuantType type) {
  return type == QuantType::Q8_0 ? 32 + 512 : type == QuantType::Q4_1 ? 32 + 32 + 256 : 32 + 256;
}
inline size_t packed_group_bytes(QuantType type, size_t cols) { return cols / 32 * packed_block_bytes(type); }
inline size_t packed_bytes(QuantType type, size_t rows, size_t cols) {
  return (rows + kPackRows - 1) / kPackRows * packed_group_bytes(type, cols);
}

// Packs `rows` stored rows of `cols` elements (row-major blocks at src) into dst
// (packed_bytes(type, rows, cols) bytes).
void pack_rows(QuantType type, const uint8_t* src, size_t rows, size_t cols, uint8_t* dst);

}  // namespace ts
