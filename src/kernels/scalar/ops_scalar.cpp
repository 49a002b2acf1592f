// Scalar reference for SimdOps: plain loops, the definition the SIMD versions are tested against.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/compress_kernels.h"
#include "kernels/kv_codes.h"
#include "kernels/quant_dot_tables.h"
#include "kernels/quant_types.h"
#include "kernels/simd_ops.h"

namespace ts {
namespace {

float dot_f32(const float* a, const float* b, size_t n) {
  float s = 0.0f;
  for (size_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void gemm_f32(const float* w, size_t n_rows, const float* x, size_t x_stride, size_t n_tok, size_t cols,
              float* y, size_t y_stride) {
  for (size_t t = 0; t < n_tok; ++t)
    for (size_t r = 0; r < n_rows; ++r) y[t * y_stride + r] = dot_f32(w + r * cols, x + t * x_stride, cols);
}

void gemm_bf16(const uint16_t* w, size_t n_rows, const uint16_t* x, size_t x_stride, size_t n_tok,
               size_t cols, float* y, size_t y_stride) {
  for (size_t t = 0; t < n_tok; ++t)
    for (size_t r = 0; r < n_rows; ++r) {
      float s = 0.0f;
      for (size_t i = 0; i < cols; ++i)
        s += bf16_to_float(w[r * cols + i]) * bf16_to_float(x[t * x_stride + i]);
      y[t * y_stride + r] = s;
    }
}

void f32_to_bf16(const float* x, uint16_t* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = float_to_bf16(x[i]);
}

float dot_f16_f32(const uint16_t* k, const float* q, size_t n) {
  float s = 0.0f;
  for (size_t i = 0; i < n; ++i) s += fp16_to_float(k[i]) * q[i];
  return s;
}

void dot_f16_blocks(const uint16_t* k, size_t block_stride, size_t n_rows, const float* q, size_t n,
                    float* out) {
  for (size_t j = 0; j < n_rows; ++j) {
    const uint16_t* row = k + j / kF16Block * block_stride + j % kF16Block;
    float s = 0.0f;
    for (size_t x = 0; x < n; ++x) s += fp16_to_float(row[x * kF16Block]) * q[x];
    out[j] = s;
  }
}

void axpy_f16(float a, const uint16_t* v, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += a * fp16_to_float(v[i]);
}

void f32_to_f16(const float* x, uint16_t* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = float_to_fp16(x[i]);
}

void rms_norm(const float* x, const float* weight, float* y, size_t n, float eps) {
  float ss = 0.0f;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (size_t i = 0; i < n; ++i) y[i] = x[i] * scale * weight[i];
}

void silu_mul(float* gate, const float* up, size_t n) {
  for (size_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void gelu_mul(float* gate, const float* up, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float x = gate[i], u = kGeluTanhScale * (x + 0.044715f * x * x * x);
    gate[i] = x / (1.0f + std::exp(-2.0f * u)) * up[i];
  }
}

void softmax(float* x, size_t n) {
  const float mx = *std::max_element(x, x + n);
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) sum += x[i] = std::exp(x[i] - mx);
  for (size_t i = 0; i < n; ++i) x[i] /= sum;
}

void rope(float* x, const float* cos_t, const float* sin_t, size_t rot_dim, bool neox) {
  const size_t half = rot_dim / 2;
  for (size_t i = 0; i < half; ++i) {
    const size_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
    const float xa = x[a], xb = x[b];
    x[a] = xa * cos_t[a] + xb * sin_t[a];
    x[b] = xb * cos_t[b] + xa * sin_t[b];
  }
}

// The online-softmax reference every attention kernel shares: for each query g, scores s_j =
// score(g, j) over the keys, then m = max s, l = sum exp(s - m), acc = sum exp(s - m) * value_j
// (added by add_value(j, weight, out)); p, when given, receives the unnormalized weights. A query
// whose scores are all -inf (masked out) gets m = -inf, l = 0, acc = 0 and weights 0.
template <class Score, class AddValue>
void attend_reference(size_t n_q, size_t n_keys, size_t head_dim, float* m, float* l, float* acc, float* p,
                      Score score, AddValue add_value) {
  std::vector<float> s(n_keys);
  for (size_t g = 0; g < n_q; ++g) {
    for (size_t j = 0; j < n_keys; ++j) s[j] = score(g, j);
    m[g] = *std::max_element(s.begin(), s.end());
    l[g] = 0.0f;
    float* out = acc + g * head_dim;
    std::fill(out, out + head_dim, 0.0f);
    for (size_t j = 0; j < n_keys; ++j) {
      const float e = m[g] == -INFINITY ? 0.0f : std::exp(s[j] - m[g]);
      l[g] += e;
      if (p) p[g * n_keys + j] = e;
      add_value(j, e, out);
    }
  }
}

template <class Rows>
void attn_rows(const float* q, size_t n_q, const uint16_t* k, const uint16_t* v, size_t stride, Rows rows,
               const uint8_t* masks, size_t n_keys, size_t head_dim, float scale, float* m, float* l,
               float* acc, float* p) {
  std::vector<float> unused;
  if (!v) {  // the scores only: values weighted into a scratch accumulator nobody reads
    unused.resize(n_q * head_dim);
    acc = unused.data();
  }
  attend_reference(
      n_q, n_keys, head_dim, m, l, acc, p,
      [&](size_t g, size_t j) {
        if (masks && !(masks[j] >> g & 1)) return -INFINITY;
        return dot_f16_f32(k + rows[j] * stride, q + g * head_dim, head_dim) * scale;
      },
      [&](size_t j, float e, float* out) {
        if (v) axpy_f16(e, v + rows[j] * stride, out, head_dim);
      });
}

void attn_chunk(const float* q, size_t n_q, const uint16_t* k, const uint16_t* v, size_t stride,
                size_t n_keys, size_t head_dim, float scale, float* m, float* l, float* acc) {
  attn_rows(q, n_q, k, v, stride, ContiguousRows{}, nullptr, n_keys, head_dim, scale, m, l, acc, nullptr);
}

void attn_gather(const float* q, size_t n_q, const uint16_t* k, const uint16_t* v, size_t stride,
                 const uint32_t* rows, const uint8_t* masks, size_t n_keys, size_t head_dim, float scale,
                 float* m, float* l, float* acc, float* p) {
  attn_rows(q, n_q, k, v, stride, ListedRows{rows}, masks, n_keys, head_dim, scale, m, l, acc, p);
}

void attn_codes(const CodedQueries& q, const CodedRows& k, const CodedRows& v, size_t n_keys, size_t head_dim,
                float scale, float* m, float* l, float* acc, float* p) {
  std::vector<float> row(head_dim), sets, bias;
  if (q.key_ranges) fold_query_sets(q, n_keys, head_dim, scale, sets, bias);
  RoundedQueries rq;
  rq.round(q.key_ranges ? sets.data() : q.q, q.n_sets(n_keys) * q.n_q, head_dim, scale, scalar::quantize_q8);
  attend_reference(
      q.n_q, n_keys, head_dim, m, l, acc, p,
      [&](size_t g, size_t j) {
        const size_t at = q.set(j) * q.n_q + g;
        return coded_key_score(k, j, rq.query(at), rq.query_codes(at), rq.query_scales(at)) +
               (q.key_ranges ? bias[at] : 0.0f);
      },
      [&](size_t j, float e, float* out) {
        decode_coded_row(v, j, row.data());
        for (size_t x = 0; x < head_dim; ++x) out[x] += e * row[x];
      });
}

}  // namespace

const SimdOps& scalar_ops() {
  static const SimdOps table{"scalar",
                             gemm_f32,
                             gemm_bf16,
                             f32_to_bf16,
                             dot_f32,
                             dot_f16_f32,
                             axpy_f16,
                             dot_f16_blocks,
                             scalar::dot_i8_pairs,
                             scalar::compress_range,
                             f32_to_f16,
                             rms_norm,
                             silu_mul,
                             gelu_mul,
                             softmax,
                             rope,
                             attn_chunk,
                             attn_gather,
                             attn_codes,
                             scalar::quantize_q8,
                             scalar::gemm_packed};
  return table;
}

}  // namespace ts
