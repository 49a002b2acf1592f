#pragma once
// Internal: the per-ISA compress kernels that the SimdOps tables point to (simd_ops.h documents
// compress_range).
#include <cstddef>
#include <cstdint>

#include "kernels/simd_ops.h"

#define TS_DECLARE_COMPRESS_KERNELS(ns)                                                          \
  namespace ts::ns {                                                                             \
  RangeCount compress_range(const uint32_t* keys, const uint32_t* values, size_t n, uint32_t lo, \
                            uint32_t hi, uint32_t* out);                                         \
  }

TS_DECLARE_COMPRESS_KERNELS(scalar)
TS_DECLARE_COMPRESS_KERNELS(avx2)
TS_DECLARE_COMPRESS_KERNELS(avx512)

#undef TS_DECLARE_COMPRESS_KERNELS
