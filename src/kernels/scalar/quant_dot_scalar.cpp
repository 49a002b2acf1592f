// Scalar reference for activation quantization and the integer dot products.
#include <cmath>
#include <cstring>

#include "kernels/packed_rows.h"
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

// Reads the packed layout element by element (kernels/packed_rows.h); per block the same terms
// as the row-major dots above.
void gemm_packed(QuantType type, const uint8_t* w, size_t n_rows, size_t cols, const Q8Activations& x,
                 size_t t0, size_t n_tok, float* y, size_t y_stride) {
  const size_t n_blocks = cols / kQ8Block, bytes = packed_block_bytes(type);
  const bool q8 = type == QuantType::Q8_0, has_min = type == QuantType::Q4_1;
  const size_t codes_at = has_min ? 64 : 32;
  for (size_t r = 0; r < n_rows; ++r) {
    const size_t group = r / kPackRows, lane = r % kPackRows;
    for (size_t t = 0; t < n_tok; ++t) {
      float total = 0.0f;
      for (size_t b = 0; b < n_blocks; ++b) {
        const uint8_t* p = w + (group * n_blocks + b) * bytes;
        const uint8_t* codes = p + codes_at + 4 * lane;
        const int8_t* xq = x.row_qs(t0 + t) + b * kQ8Block;
        int isum = 0;
        for (size_t s = 0; s < 8; ++s)
          for (size_t i = 0; i < 4; ++i) {
            const int code = q8      ? static_cast<int8_t>(codes[64 * s + i])
                             : s < 4 ? codes[64 * s + i] & 0xF
                                     : codes[64 * (s - 4) + i] >> 4;
            isum += code * xq[4 * s + i];
          }
        uint16_t d16, m16;
        std::memcpy(&d16, p + 2 * lane, 2);
        std::memcpy(&m16, p + 32 + 2 * lane, 2);
        const float d = fp16_to_float(d16);
        const float offset = has_min ? fp16_to_float(m16) : q8 ? 0.0f : -8.0f * d;
        total += d * x.row_d(t0 + t)[b] * static_cast<float>(isum) + offset * x.row_s(t0 + t)[b];
      }
      y[t * y_stride + r] = total;
    }
  }
}

void gemm_q8(QuantType type, const uint8_t* w, size_t row_stride, size_t n_rows, const Q8Activations& x,
             size_t t0, size_t n_tok, float* y, size_t y_stride) {
  gemm_by_dots<dot_q8>(type, w, row_stride, n_rows, x, t0, n_tok, y, y_stride);
}

}  // namespace ts::scalar
