#pragma once
// Low-bit KV cache codes: asymmetric round-to-nearest integers of 8, 4 or 2 bits, x ~ scale * code + min.
//
// A segment of n values (n a multiple of 8 / bits) packs into n * bits / 8 bytes B. Value j sits
// in byte j % B at bit (j / B) * bits: the bytes hold 8 / bits contiguous runs of B values in
// their successive bit fields, so one vector load of bytes yields, for each bit field, a run of
// consecutive values (no shuffles in the fused dequantize-and-dot kernels of simd_ops.h).
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

}  // namespace ts
