#include "kernels/packed_rows.h"

#include <cstring>

#include "kernels/quant_blocks.h"

namespace ts {

bool packable(QuantType type) {
  return type == QuantType::Q4_0 || type == QuantType::Q4_1 || type == QuantType::Q8_0;
}

void pack_rows(QuantType type, const uint8_t* src, size_t rows, size_t cols, uint8_t* dst) {
  const QuantTraits& t = quant_traits(type);
  const size_t n_blocks = cols / 32, stride = row_bytes(t, cols), out_bytes = packed_block_bytes(type);
  const bool has_min = type == QuantType::Q4_1;
  const size_t codes_at = has_min ? 64 : 32, qs_at = has_min ? 4 : 2, qs_bytes = t.block_bytes - qs_at;
  std::memset(dst, 0, packed_bytes(type, rows, cols));  // padding rows: d = 0, contribute nothing
  for (size_t r = 0; r < rows; ++r) {
    const size_t group = r / kPackRows, lane = r % kPackRows;
    for (size_t b = 0; b < n_blocks; ++b) {
      const uint8_t* in = src + r * stride + b * t.block_bytes;
      uint8_t* out = dst + (group * n_blocks + b) * out_bytes;
      std::memcpy(out + 2 * lane, in, 2);
      if (has_min) std::memcpy(out + 32 + 2 * lane, in + 2, 2);
      // Chunk k (4 bytes of qs) of row `lane` goes to bytes 4*lane.. of 64-byte vector k.
      for (size_t k = 0; k < qs_bytes / 4; ++k)
        std::memcpy(out + codes_at + 64 * k + 4 * lane, in + qs_at + 4 * k, 4);
    }
  }
}

}  // namespace ts
