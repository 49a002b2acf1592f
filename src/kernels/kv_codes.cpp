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

void fold_query_sets(const CodedQueries& q, size_t n_keys, size_t head_dim, float scale,
                     std::vector<float>& sets, std::vector<float>& bias) {
  const size_t n_sets = q.n_sets(n_keys);
  sets.resize(n_sets * q.n_q * head_dim);
  bias.resize(n_sets * q.n_q);
  for (size_t t = 0; t < n_sets; ++t) {
    const CodeRange* r = q.key_ranges + t * q.key_ranges_stride;
    for (size_t g = 0; g < q.n_q; ++g) {
      const float* qg = q.q + g * head_dim;
      float* out = &sets[(t * q.n_q + g) * head_dim];
      float qm = 0.0f;
      for (size_t c = 0; c < head_dim; ++c) {
        out[c] = qg[c] * r[c].scale;
        qm += qg[c] * r[c].min;
      }
      bias[t * q.n_q + g] = scale * qm;
    }
  }
}

void RoundedQueries::round(const float* queries, size_t n_q, size_t head_dim, float scale,
                           Quantize quantize) {
  padded = (head_dim + kQueryBlock - 1) / kQueryBlock * kQueryBlock;
  q.resize(n_q * padded);  // every float written below: no zeroing pass (a KIVI step rounds ~800 queries)
  for (size_t g = 0; g < n_q; ++g) {
    float* out = &q[g * padded];
    for (size_t c = 0; c < head_dim; ++c) out[c] = queries[g * head_dim + c] * scale;
    std::fill(out + head_dim, out + padded, 0.0f);
  }
  codes.resize(q.size());
  scales.resize(q.size() / kQueryBlock);
  half_sums.resize(2 * scales.size());
  quantize(q.data(), q.size(), codes.data(), scales.data(), half_sums.data());
}

float coded_key_score(const CodedRows& rows, size_t j, const float* q, const int8_t* qi,
                      const float* q_scales) {
  const uint8_t* row = rows.codes + j * rows.row_bytes;
  const CodeRange* ranges = rows.ranges + j * rows.range_stride;
  const bool rounded = scores_rounded_query(rows.bits);
  float score = 0.0f;
  for (size_t s = 0; s < rows.n_segments; ++s) {
    const CodeSegment& seg = rows.segments[s];
    const uint8_t* packed = row + code_bytes(rows.bits, seg.offset);
    const CodeRange r = ranges[seg.range];
    float products = 0.0f, q_sum = 0.0f;  // rounded: sum of d * qi * code, and of q
    for (size_t i = 0; i < seg.size; ++i) {
      const size_t c = seg.offset + i;
      const float code = static_cast<float>(code_at(packed, rows.bits, seg.size, i));
      if (rounded) {
        products += q_scales[c / kQueryBlock] * static_cast<float>(qi[c]) * code;
        q_sum += q[c];
      } else {
        score += q[c] * (r.scale * code + r.min);
      }
    }
    if (rounded) score += r.scale * products + r.min * q_sum;
  }
  return score;
}

}  // namespace ts
