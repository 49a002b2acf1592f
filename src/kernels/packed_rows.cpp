#include "kernels/packed_rows.h"

#include <cstring>

#include "kernels/quant_codes.h"

namespace ts {
namespace {

// Byte of the code vectors holding element e (0..31) of row `lane`, and the shift of its field,
// for the low bits and for the high bit planes (packed_rows.h).
struct Place {
  size_t byte;
  int shift;
};
Place low_place(const PackedForm& f, size_t lane, size_t e) {
  const size_t half = e / 16, k = (e % 16) / 4, i = e % 4;
  if (f.low_bits == 8) return {64 * (e / 4) + 4 * lane + i, 0};
  if (f.low_bits == 4) return {64 * k + 4 * lane + i, static_cast<int>(4 * half)};
  return {64 * half + 4 * lane + i, static_cast<int>(2 * k)};  // 2-bit fields
}
Place high_place(const PackedForm& f, size_t lane, size_t e) {
  const size_t half = e / 16, k = (e % 16) / 4, i = e % 4;
  if (f.high_bits == 1) return {4 * lane + i, static_cast<int>(4 * half + k)};
  return {64 * half + 4 * lane + i, static_cast<int>(2 * k)};  // two bits
}

// Writes the codes of one unit (32 columns) of row `lane` into the zeroed code bytes.
void put_unit_codes(const PackedForm& f, const int* u, size_t lane, uint8_t* codes) {
  const int low_mask = (1 << (f.low_bits == 8 ? 0 : f.low_bits)) - 1, high_mask = (1 << f.high_bits) - 1;
  uint8_t* high = codes + 64 * f.low_bits;
  for (size_t e = 0; e < kPackCols; ++e) {
    const Place lo = low_place(f, lane, e);
    if (f.low_bits == 8) {
      codes[lo.byte] = static_cast<uint8_t>(static_cast<int8_t>(u[e]));
      continue;
    }
    codes[lo.byte] |= static_cast<uint8_t>((u[e] & low_mask) << lo.shift);
    if (f.high_bits == 0) continue;
    const Place hi = high_place(f, lane, e);
    high[hi.byte] |= static_cast<uint8_t>(((u[e] >> f.low_bits) & high_mask) << hi.shift);
  }
}

}  // namespace

void unit_codes(const PackedForm& f, const uint8_t* unit, size_t lane, int* u) {
  const uint8_t* codes = unit + f.scale_bytes();
  const uint8_t* high = codes + 64 * f.low_bits;
  const int low_mask = (1 << (f.low_bits == 8 ? 0 : f.low_bits)) - 1, high_mask = (1 << f.high_bits) - 1;
  for (size_t e = 0; e < kPackCols; ++e) {
    const Place lo = low_place(f, lane, e);
    if (f.low_bits == 8) {
      u[e] = static_cast<int8_t>(codes[lo.byte]);
      continue;
    }
    u[e] = (codes[lo.byte] >> lo.shift) & low_mask;
    if (f.high_bits == 0) continue;
    const Place hi = high_place(f, lane, e);
    u[e] |= ((high[hi.byte] >> hi.shift) & high_mask) << f.low_bits;
  }
}

void pack_rows(QuantType type, const uint8_t* src, size_t rows, size_t cols, uint8_t* dst) {
  const QuantTraits& t = quant_traits(type);
  const PackedForm f = packed_form(type);
  const size_t n_blocks = cols / t.block_elems, stride = row_bytes(t, cols), units = f.block_cols() / kPackCols;
  const size_t groups = f.groups_per_unit();
  std::memset(dst, 0, packed_bytes(type, rows, cols));  // padding rows: d = 0, contribute nothing
  int u[256];
  for (size_t r = 0; r < rows; ++r) {
    const size_t group = r / kPackRows, lane = r % kPackRows;
    for (size_t b = 0; b < n_blocks; ++b) {
      const uint8_t* in = src + r * stride + b * t.block_bytes;
      uint8_t* out = dst + (group * n_blocks + b) * f.block_bytes();
      const BlockFields fields = block_fields(type, in);
      std::memcpy(out + 2 * lane, &fields.d, 2);
      if (f.has_min) std::memcpy(out + 2 * kPackRows + 2 * lane, &fields.m, 2);
      block_codes(type, in, u);
      for (size_t k = 0; k < units; ++k) {
        uint8_t* unit = out + f.header_bytes() + k * f.unit_bytes();
        if (f.k_quant)
          for (size_t g = 0; g < groups; ++g) {
            unit[g * kPackRows + lane] = static_cast<uint8_t>(fields.sc[k * groups + g]);
            if (f.has_min) unit[(groups + g) * kPackRows + lane] = static_cast<uint8_t>(fields.mn[k * groups + g]);
          }
        put_unit_codes(f, u + k * kPackCols, lane, unit + f.scale_bytes());
      }
    }
  }
}

}  // namespace ts
