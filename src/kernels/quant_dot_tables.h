#pragma once
// Internal: the per-ISA quantized kernels that the SimdOps tables point to.
#include <cstddef>
#include <cstdint>

#include "kernels/q8_activations.h"
#include "kernels/quant_types.h"

#define TS_DECLARE_QUANT_KERNELS(ns)                                                                       \
  namespace ts::ns {                                                                                       \
  void quantize_q8(const float* x, size_t n, int8_t* qs, float* d, float* s);                              \
  float dot_q8(QuantType type, const uint8_t* w, const Q8Row& x, size_t n_blocks);                         \
  void gemm_packed(QuantType type, const uint8_t* w, size_t n_rows, size_t cols, const Q8Activations& x,   \
                   size_t t0, size_t n_tok, float* y, size_t y_stride);                                    \
  void gemm_q8(QuantType type, const uint8_t* w, size_t row_stride, size_t n_rows, const Q8Activations& x, \
               size_t t0, size_t n_tok, float* y, size_t y_stride);                                        \
  }

TS_DECLARE_QUANT_KERNELS(scalar)
TS_DECLARE_QUANT_KERNELS(avx2)
TS_DECLARE_QUANT_KERNELS(avx512)

#undef TS_DECLARE_QUANT_KERNELS

namespace ts {

// A gemm_q8 made of single dot products, for ISAs or types without a register-blocked kernel.
template <float (*DotQ8)(QuantType, const uint8_t*, const Q8Row&, size_t)>
void gemm_by_dots(QuantType type, const uint8_t* w, size_t row_stride, size_t n_rows, const Q8Activations& x,
                  size_t t0, size_t n_tok, float* y, size_t y_stride) {
  for (size_t t = 0; t < n_tok; ++t) {
    const Q8Row row{x.row_qs(t0 + t), x.row_d(t0 + t), x.row_s(t0 + t)};
    for (size_t r = 0; r < n_rows; ++r)
      y[t * y_stride + r] = DotQ8(type, w + r * row_stride, row, x.blocks_per_row());
  }
}

}  // namespace ts
