#pragma once
// Activations quantized to 8-bit blocks of 32 for integer dot products against 4/8-bit weights
// (llama.cpp's approach). Stored as structure-of-arrays so 64 consecutive int8 values load at once:
// block b of token t has values qs[t*cols + 32b ..], scale d[t*nb + b], and the integer sums of
// its two halves of 16 in sums[t*2nb + 2b ..] (for code offsets and minimums, exactly).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ts {

inline constexpr size_t kQ8Block = 32;

struct Q8Activations {
  size_t n_tok = 0, cols = 0;
  std::vector<int8_t> qs;
  std::vector<float> d;
  std::vector<int16_t> sums;

  size_t blocks_per_row() const { return cols / kQ8Block; }
  const int8_t* row_qs(size_t t) const { return qs.data() + t * cols; }
  const float* row_d(size_t t) const { return d.data() + t * blocks_per_row(); }
  const int16_t* row_sums(size_t t) const { return sums.data() + 2 * t * blocks_per_row(); }
};

}  // namespace ts
