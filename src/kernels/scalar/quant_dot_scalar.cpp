// Scalar reference for activation quantization and the integer dot products.
#include <cmath>

#include "kernels/quant_blocks.h"
#include "kernels/quant_codes.h"
#include "kernels/quant_dot_tables.h"
#include "kernels/quant_types.h"

namespace ts::scalar {

void quantize_q8(const float* x, size_t n, int8_t* qs, float* d, float* s) {
  for (size_t b = 0; b < n / kQ8Block; ++b) {
    const float* xb = x + b * kQ8Block;
    float amax = 0.0f;
    for (size_t i = 0; i < kQ8Block; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    const float scale = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (size_t i = 0; i < kQ8Block; ++i) {
      const int q = static_cast<int>(std::nearbyint(xb[i] * inv));  // ties to even, as SIMD cvtps
      qs[b * kQ8Block + i] = static_cast<int8_t>(q);
      sum += q;
    }
    d[b] = scale;
    s[b] = scale * static_cast<float>(sum);
  }
}

namespace {

// sum over the block of q_w * q_x, with the 4-bit weights in ggml's nibble order.
int q4_block_sum(const uint8_t* qs, const int8_t* q) {
  int sum = 0;
  for (size_t j = 0; j < 16; ++j) sum += (qs[j] & 0xF) * q[j] + (qs[j] >> 4) * q[j + 16];
  return sum;
}

// Each block contributes d_w * d_x * sum(q_w * q_x) plus its offset (-8 d_w or m) times s = d_x * sum(q_x).
float q4_0_dot(const uint8_t* w, const Q8Row& x, size_t n_blocks) {
  const auto* blocks = reinterpret_cast<const BlockQ4_0*>(w);
  float total = 0.0f;
  for (size_t b = 0; b < n_blocks; ++b) {
    const float dw = fp16_to_float(blocks[b].d);
    total += dw * x.d[b] * static_cast<float>(q4_block_sum(blocks[b].qs, x.qs + b * kQ8Block)) -
             8.0f * dw * x.s[b];
  }
  return total;
}

float q4_1_dot(const uint8_t* w, const Q8Row& x, size_t n_blocks) {
  const auto* blocks = reinterpret_cast<const BlockQ4_1*>(w);
  float total = 0.0f;
  for (size_t b = 0; b < n_blocks; ++b) {
    const float dw = fp16_to_float(blocks[b].d);
    total += dw * x.d[b] * static_cast<float>(q4_block_sum(blocks[b].qs, x.qs + b * kQ8Block)) +
             fp16_to_float(blocks[b].m) * x.s[b];
  }
  return total;
}

float q8_0_dot(const uint8_t* w, const Q8Row& x, size_t n_blocks) {
  const auto* blocks = reinterpret_cast<const BlockQ8_0*>(w);
  float total = 0.0f;
  for (size_t b = 0; b < n_blocks; ++b) {
    int sum = 0;
    for (size_t j = 0; j < kQ8Block; ++j) sum += blocks[b].qs[j] * x.qs[b * kQ8Block + j];
    total += fp16_to_float(blocks[b].d) * x.d[b] * static_cast<float>(sum);
  }
  return total;
}

// The code form (quant_codes.h), group by group of 16 with exact integer sums.
float code_form_dot(QuantType type, const uint8_t* w, const Q8Row& x, size_t n_blocks) {
  const QuantTraits& t = quant_traits(type);
  const int c = code_offset(type);
  uint8_t u[kQK_K];
  float a[kQK_K / kCodeGroup], b[kQK_K / kCodeGroup];
  float total = 0.0f;
  for (size_t blk = 0; blk < n_blocks * kQ8Block / t.block_elems; ++blk) {
    block_codes(type, w + blk * t.block_bytes, u);
    block_group_scales(type, w + blk * t.block_bytes, a, b);
    for (size_t g = 0; g < t.block_elems / kCodeGroup; ++g) {
      const size_t first = blk * t.block_elems + g * kCodeGroup;
      int isum = 0, xsum = 0;
      for (size_t j = 0; j < kCodeGroup; ++j) {
        isum += u[g * kCodeGroup + j] * x.qs[first + j];
        xsum += x.qs[first + j];
      }
      total += x.d[first / kQ8Block] *
               (a[g] * static_cast<float>(isum - c * xsum) + b[g] * static_cast<float>(xsum));
    }
  }
  return total;
}

}  // namespace

float dot_q8(QuantType type, const uint8_t* w, const Q8Row& x, size_t n_blocks) {
  switch (type) {
    case QuantType::Q4_0:
      return q4_0_dot(w, x, n_blocks);
    case QuantType::Q4_1:
      return q4_1_dot(w, x, n_blocks);
    case QuantType::Q8_0:
      return q8_0_dot(w, x, n_blocks);
    default:
      return code_form_dot(type, w, x, n_blocks);
  }
}

void gemm_q8(QuantType type, const uint8_t* w, size_t row_stride, size_t n_rows, const Q8Activations& x,
             size_t t0, size_t n_tok, float* y, size_t y_stride) {
  gemm_by_dots<dot_q8>(type, w, row_stride, n_rows, x, t0, n_tok, y, y_stride);
}

}  // namespace ts::scalar
