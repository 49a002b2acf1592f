#include "kernels/row_gather.h"

#include <cstring>

namespace ts {

void gather_rows(const float* src, std::span<const uint32_t> rows, size_t width, float* dst) {
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(dst + i * width, src + rows[i] * width, width * sizeof(float));
}

void scatter_add_rows(const float* src, std::span<const uint32_t> rows, size_t width, float* dst) {
  for (size_t i = 0; i < rows.size(); ++i) {
    float* d = dst + rows[i] * width;
    const float* s = src + i * width;
    for (size_t j = 0; j < width; ++j) d[j] += s[j];
  }
}

}  // namespace ts
