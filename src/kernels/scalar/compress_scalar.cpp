// Scalar reference of compress_range.
#include "kernels/compress_kernels.h"

namespace ts::scalar {

RangeCount compress_range(const uint32_t* keys, const uint32_t* values, size_t n, uint32_t lo, uint32_t hi,
                          uint32_t* out) {
  RangeCount c;
  for (size_t j = 0; j < n; ++j) {
    const uint32_t key = keys[j];
    out[c.in_range] = values[j];  // kept by the count's step, else overwritten
    c.in_range += static_cast<size_t>(key >= lo) & static_cast<size_t>(key <= hi);
    c.above += key > hi;
  }
  return c;
}

}  // namespace ts::scalar
