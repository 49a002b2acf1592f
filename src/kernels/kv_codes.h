#pragma once
// Low-bit KV cache codes: asymmetric round-to-nearest integers of 8, 4 or 2 bits, x ~ scale * code + min.
//
// A segment of n values (n a multiple of 8 / bits) packs into n * bits / 8 bytes B. Value j sits
// in byte j % B at bit (j / B) * bits: the bytes hold 8 / bits contiguous runs of B values in
// their successive bit fields, so one load of bytes yields, for each bit field, a run of
// consecutive values (one shift and mask per 16 channels in the attention kernel of simd_ops.h).
#include <cstddef>
#include <cstdint>

namespace ts {

inline bool valid_code_bits(unsigned bits) { return bits == 8 || bits == 4 || bits == 2; }
inline size_t code_bytes(unsigned bits, size_t n) { return n * bits / 8; }
inline unsigned code_max(unsigned bits) { return (1u << bits) - 1u; }

// The code of value j of a packed segment of n values.
inline unsigned code_at(const uint8_t* packed, unsigned bits, size_t n, size_t j) {
  const size_t b = code_bytes(bits, n);
  return (packed[j % b] >> ((j / b) * bits)) & code_max(bits);
}

// Range of one quantization group: the scale and minimum that map codes back to values.
struct CodeRange {
  float scale = 0.0f;
  float min = 0.0f;
};

// The asymmetric RTN range of [lo, hi]: scale = (hi - lo) / (2^bits - 1) (a constant group gets
// scale 0 and decodes exactly to lo).
CodeRange code_range(float lo, float hi, unsigned bits);

// code = clamp(round((x - min) / scale), 0, 2^bits - 1), ties to even (torch.round), so that
// |x - (scale * code + min)| <= scale / 2 inside the range.
uint8_t code_of(float x, CodeRange r, unsigned bits);
// Packs n codes (one per byte) into code_bytes(bits, n) bytes.
void pack_codes(const uint8_t* codes, size_t n, unsigned bits, uint8_t* packed);

// A run of a row's channels sharing one range: `size` values from channel `offset` (of the KV
// head), packed on their own at byte code_bytes(bits, offset) of the row, decoded with the row's
// range number `range`.
struct CodeSegment {
  uint32_t offset = 0;
  uint32_t size = 0;
  uint32_t range = 0;
};

// Consecutive coded rows of one KV head, as the attention kernel (SimdOps::attn_codes) reads
// them: row j's codes start at codes + j * row_bytes and its segments (which tile the head in
// order) decode with ranges[j * range_stride + segment.range]; range_stride 0 shares one set of
// ranges between all rows (static ranges).
struct CodedRows {
  const uint8_t* codes = nullptr;
  size_t row_bytes = 0;
  unsigned bits = 0;
  const CodeSegment* segments = nullptr;
  size_t n_segments = 0;
  const CodeRange* ranges = nullptr;
  size_t range_stride = 0;
};

// Row j of `rows` decoded to floats (scale * code + min), one per channel of the head.
void decode_coded_row(const CodedRows& rows, size_t j, float* out);

}  // namespace ts
