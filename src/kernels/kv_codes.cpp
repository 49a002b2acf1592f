#include "kernels/kv_codes.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ts {

CodeRange code_range(float lo, float hi, unsigned bits) {
  return {(hi - lo) / static_cast<float>(code_max(bits)), lo};
}

uint8_t code_of(float x, CodeRange r, unsigned bits) {
  if (!(r.scale > 0.0f)) return 0;
  const float c = std::nearbyint((x - r.min) / r.scale);
  return static_cast<uint8_t>(std::clamp(c, 0.0f, static_cast<float>(code_max(bits))));
}

void pack_codes(const uint8_t* codes, size_t n, unsigned bits, uint8_t* packed) {
  const size_t b = code_bytes(bits, n);
  std::memset(packed, 0, b);
  for (size_t j = 0; j < n; ++j)
    packed[j % b] = static_cast<uint8_t>(packed[j % b] | (codes[j] << ((j / b) * bits)));
}

void decode_coded_row(const CodedRows& rows, size_t j, float* out) {
  const uint8_t* row = rows.codes + j * rows.row_bytes;
  const CodeRange* ranges = rows.ranges + j * rows.range_stride;
  for (size_t s = 0; s < rows.n_segments; ++s) {
    const CodeSegment& seg = rows.segments[s];
    const uint8_t* packed = row + code_bytes(rows.bits, seg.offset);
    const CodeRange r = ranges[seg.range];
    for (size_t i = 0; i < seg.size; ++i)
      out[seg.offset + i] = r.scale * static_cast<float>(code_at(packed, rows.bits, seg.size, i)) + r.min;
  }
}

}  // namespace ts
