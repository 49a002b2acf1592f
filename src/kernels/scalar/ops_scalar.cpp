// Scalar reference for SimdOps: plain loops, the definition the SIMD versions are tested against.
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

void gemm_f32(const float* w, size_t n_rows, const float* x, size_t x_stride, size_t n_tok, size_t cols, float* y,
              size_t y_stride) {
  for (size_t t = 0; t < n_tok; ++t)
    for (size_t r = 0; r < n_rows; ++r) y[t * y_stride + r] = dot_f32(w + r * cols, x + t * x_stride, cols);
}

float dot_f16_f32(const uint16_t* k, const float* q, size_t n) {
  float s = 0.0f;
  for (size_t i = 0; i < n; ++i) s += fp16_to_float(k[i]) * q[i];
  return s;
}

void axpy_f16(float a, const uint16_t* v, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += a * fp16_to_float(v[i]);
}

void f32_to_f16(const float* x, uint16_t* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = float_to_fp16(x[i]);
}

}  // namespace

const SimdOps& scalar_ops() {
  static const SimdOps table{"scalar",           gemm_f32,         dot_f32,          dot_f16_f32,
                             axpy_f16,           f32_to_f16,       scalar::quantize_q8, scalar::dot_q4_0,
                             scalar::dot_q4_1, scalar::dot_q8_0, scalar::gemm_q8};
  return table;
}

}  // namespace ts
