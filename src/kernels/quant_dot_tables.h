#pragma once
// Internal: the per-ISA quantized kernels that the SimdOps tables point to.
#include <cstddef>
#include <cstdint>

#include "kernels/q8_activations.h"
#include "kernels/quant_types.h"

#define TS_DECLARE_QUANT_KERNELS(ns)                                                                     \
  namespace ts::ns {                                                                                     \
  void quantize_q8(const float* x, size_t n, int8_t* qs, float* d, int16_t* sums);                  \
  void gemm_packed(QuantType type, const uint8_t* w, size_t n_rows, size_t cols, const Q8Activations& x, \
                   size_t t0, size_t n_tok, float* y, size_t y_stride);                                  \
  void dot_i8_pairs(const int8_t* k, size_t block_stride, const float* scales, size_t n_rows,          \
                    const int16_t* q, float q_scale, size_t n, float* out);                              \
  }

TS_DECLARE_QUANT_KERNELS(scalar)
TS_DECLARE_QUANT_KERNELS(avx2)
TS_DECLARE_QUANT_KERNELS(avx512)

#undef TS_DECLARE_QUANT_KERNELS
