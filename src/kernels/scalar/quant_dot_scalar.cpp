// Scalar reference for activation quantization and the packed integer products.
#include <cmath>
#include <cstring>

#include "kernels/packed_rows.h"
#include "kernels/quant_dot_tables.h"
#include "kernels/quant_types.h"
#include "kernels/simd_ops.h"

namespace ts::scalar {

void quantize_q8(const float* x, size_t n, int8_t* qs, float* d, int16_t* sums) {
  for (size_t b = 0; b < n / kQ8Block; ++b) {
    const float* xb = x + b * kQ8Block;
    float amax = 0.0f;
    for (size_t i = 0; i < kQ8Block; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    const float scale = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
    int sum = 0, first_half = 0;
    for (size_t i = 0; i < kQ8Block; ++i) {
      const int q = static_cast<int>(std::nearbyint(xb[i] * inv));  // ties to even, as SIMD cvtps
      qs[b * kQ8Block + i] = static_cast<int8_t>(q);
      sum += q;
      if (i < kQ8Block / 2) first_half += q;
    }
    d[b] = scale;
    sums[2 * b] = static_cast<int16_t>(first_half);
    sums[2 * b + 1] = static_cast<int16_t>(sum - first_half);
  }
}

// Reads the packed layout element by element (kernels/packed_rows.h) and sums each group exactly:
// d_x * (a * (sum u*q - c * sum q) + b * sum q).
void gemm_packed(QuantType type, const uint8_t* w, size_t n_rows, size_t cols, const Q8Activations& x,
                 size_t t0, size_t n_tok, float* y, size_t y_stride) {
  const PackedForm f = packed_form(type);
  const size_t n_blocks = cols / f.block_cols(), units = f.block_cols() / kPackCols,
               groups = f.groups_per_unit();
  int u[kPackCols];
  for (size_t r = 0; r < n_rows; ++r) {
    const size_t group = r / kPackRows, lane = r % kPackRows;
    for (size_t t = 0; t < n_tok; ++t) {
      const int8_t* xq = x.row_qs(t0 + t);
      float total = 0.0f;
      for (size_t b = 0; b < n_blocks; ++b) {
        const uint8_t* block = w + (group * n_blocks + b) * f.block_bytes();
        uint16_t d16, m16 = 0;
        std::memcpy(&d16, block + 2 * lane, 2);
        if (f.has_min) std::memcpy(&m16, block + 2 * kPackRows + 2 * lane, 2);
        const float d = fp16_to_float(d16), m = fp16_to_float(m16);
        for (size_t k = 0; k < units; ++k) {
          const uint8_t* unit = block + f.header_bytes() + k * f.unit_bytes();
          unit_codes(f, unit, lane, u);
          const size_t xb = b * units + k;
          for (size_t g = 0; g < groups; ++g) {
            float a = d, bias = m;
            if (f.k_quant) {
              const uint8_t sc = unit[g * kPackRows + lane];
              a = d * static_cast<float>(f.signed_scales ? static_cast<int8_t>(sc) : sc);
              bias = f.has_min ? -m * static_cast<float>(unit[(groups + g) * kPackRows + lane]) : 0.0f;
            }
            int isum = 0, xsum = 0;
            for (size_t e = g * f.group_elems; e < (g + 1) * f.group_elems; ++e) {
              isum += u[e] * xq[xb * kQ8Block + e];
              xsum += xq[xb * kQ8Block + e];
            }
            total += x.row_d(t0 + t)[xb] *
                     (a * static_cast<float>(isum - f.code_offset * xsum) + bias * static_cast<float>(xsum));
          }
        }
      }
      y[t * y_stride + r] = total;
    }
  }
}

void dot_i8_pairs(const int8_t* k, size_t block_stride, const float* scales, size_t n_rows, const int16_t* q,
                  float q_scale, size_t n, float* out) {
  for (size_t j = 0; j < n_rows; ++j) {
    const int8_t* row = k + j / kF16Block * block_stride + j % kF16Block * 2;
    int32_t s = 0;
    for (size_t x = 0; x < n; ++x) s += int32_t{q[x]} * row[x / 2 * 2 * kF16Block + x % 2];
    out[j] = static_cast<float>(s) * (scales[j] * q_scale);
  }
}

}  // namespace ts::scalar
