#pragma once
// Low-bit KV cache codes: asymmetric round-to-nearest integers of 8, 4 or 2 bits, x ~ scale * code + min.
//
// A segment of n values (n a multiple of 8 / bits) packs into n * bits / 8 bytes B. Value j sits
// in byte j % B at bit (j / B) * bits: the bytes hold 8 / bits contiguous runs of B values in
// their successive bit fields, so one load of bytes yields, for each bit field, a run of
// consecutive values (a few shifts and masks per 16 channels in the attention kernels of simd_ops.h).
#include <cstddef>
#include <cstdint>
#include <vector>

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

// The queries of SimdOps::attn_codes: n_q queries of head_dim floats. Keys with per-channel ranges
// (KIVI) keep those ranges beside the queries instead of in their rows (whose own ranges are then
// {1, 0}): block t of block_rows rows has head_dim of them at key_ranges + t * key_ranges_stride,
// and its rows are scored against the queries folded with them, a set of its own: q * range.scale
// per channel, plus the bias q . range.min (times the attention scale, as the scores). Row j of a
// call lies in block (j + skip) / block_rows (skip: the rows of the first block that lie before the
// call's first row); block_rows 0: one block for every row. key_ranges null: no fold, one set.
struct CodedQueries {
  const float* q = nullptr;
  size_t n_q = 0;
  const CodeRange* key_ranges = nullptr;
  size_t key_ranges_stride = 0;
  size_t block_rows = 0, skip = 0;
  size_t set(size_t j) const { return block_rows && key_ranges ? (j + skip) / block_rows : 0; }
  size_t n_sets(size_t n_keys) const { return n_keys ? set(n_keys - 1) + 1 : 0; }
  // The end of row j's set within rows 0..n_keys.
  size_t set_end(size_t j, size_t n_keys) const {
    if (!block_rows || !key_ranges) return n_keys;
    const size_t end = (set(j) + 1) * block_rows - skip;
    return end < n_keys ? end : n_keys;
  }
};

// The query sets of a call over n_keys rows folded with q.key_ranges (the scalar reference; the
// SIMD tables fold their own way): set t's query g at sets[(t * n_q + g) * head_dim ..], its bias,
// times `scale`, at bias[t * n_q + g]. Not called without key ranges.
void fold_query_sets(const CodedQueries& q, size_t n_keys, size_t head_dim, float scale,
                     std::vector<float>& sets, std::vector<float>& bias);

// Row j of `rows` decoded to floats (scale * code + min), one per channel of the head.
void decode_coded_row(const CodedRows& rows, size_t j, float* out);

// Keys coded at 4 or 2 bits are scored against the query rounded to 8 bits in blocks of 32
// channels (SimdOps::quantize_q8, llama.cpp's q8_0; head dims padded with zeros to whole blocks),
// as llama.cpp scores quantized keys: the products of codes and rounded query are integers
// (pmaddubsw / vpdpbusd), and rounding the query moves a score far less than rounding the key did
// (a 4-bit step is 1/15 of a group's range, the query's 1/254 of its block's largest channel).
// Pairs of 8-bit codes times 8-bit query would leave int16: those keys are scored in float.
inline bool scores_rounded_query(unsigned bits) { return bits <= 4; }
inline constexpr size_t kQueryBlock = 32;

// n_q queries of head_dim floats times `scale`, each padded with zeros to whole kQueryBlocks and
// rounded by `quantize` (SimdOps::quantize_q8 or its scalar reference): coded_key_score's operands.
struct RoundedQueries {
  using Quantize = void (*)(const float* x, size_t n, int8_t* qs, float* d, int16_t* sums);
  size_t padded = 0;
  std::vector<float> q, scales;  // [g][padded], [g][padded / kQueryBlock]
  std::vector<int8_t> codes;     // [g][padded]
  std::vector<int16_t> half_sums;

  void round(const float* queries, size_t n_q, size_t head_dim, float scale, Quantize quantize);
  const float* query(size_t g) const { return &q[g * padded]; }
  const int8_t* query_codes(size_t g) const { return &codes[g * padded]; }
  const float* query_scales(size_t g) const { return &scales[g * padded / kQueryBlock]; }
};

// The score of key row j for the query q (head_dim floats), as attention takes it: with the
// query rounded (scores_rounded_query: qi[c] ~ q[c] / q_scales[c / kQueryBlock])
//   sum_c q_scales[c / kQueryBlock] * qi[c] * scale(c) * code(c) + sum_c q[c] * min(c),
// otherwise q . the decoded row (qi, q_scales unused); scale(c), min(c): the range of channel c's
// segment.
float coded_key_score(const CodedRows& rows, size_t j, const float* q, const int8_t* qi,
                      const float* q_scales);

}  // namespace ts
