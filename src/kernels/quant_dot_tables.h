#pragma once
// Internal: the per-ISA quantized kernels that the SimdOps tables point to.
#include <cstddef>
#include <cstdint>

#include "kernels/q8_activations.h"

#define TS_DECLARE_QUANT_KERNELS(ns)                                                \
  namespace ts::ns {                                                                \
  void quantize_q8(const float* x, size_t n, int8_t* qs, float* d, float* s);       \
  float dot_q4_0(const uint8_t* w, const Q8Row& x, size_t n_blocks);                \
  float dot_q4_1(const uint8_t* w, const Q8Row& x, size_t n_blocks);                \
  float dot_q8_0(const uint8_t* w, const Q8Row& x, size_t n_blocks);                \
  }

TS_DECLARE_QUANT_KERNELS(scalar)
TS_DECLARE_QUANT_KERNELS(avx2)
TS_DECLARE_QUANT_KERNELS(avx512)

#undef TS_DECLARE_QUANT_KERNELS
