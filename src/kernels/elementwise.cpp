#include "kernels/elementwise.h"

#include <cmath>

namespace ts {

void rms_norm(const float* x, const float* weight, float* y, size_t n, float eps) {
  double ss = 0.0;  // double: n is small and this keeps the norm exact to float precision
  for (size_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  for (size_t i = 0; i < n; ++i) y[i] = x[i] * scale * weight[i];
}

void softmax(float* x, size_t n) {
  float mx = -INFINITY;
  for (size_t i = 0; i < n; ++i) mx = std::fmax(mx, x[i]);
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (size_t i = 0; i < n; ++i) x[i] *= inv;
}

void silu_mul(float* gate, const float* up, size_t n) {
  for (size_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void rope(float* x, size_t rot_dim, float pos, const float* inv_freq, RopeLayout layout) {
  const size_t half = rot_dim / 2;
  const size_t stride = layout == RopeLayout::Interleaved ? 1 : half;
  for (size_t i = 0; i < half; ++i) {
    const float theta = pos * inv_freq[i];
    const float c = std::cos(theta), s = std::sin(theta);
    const size_t a = layout == RopeLayout::Interleaved ? 2 * i : i;
    const float x0 = x[a], x1 = x[a + stride];
    x[a] = x0 * c - x1 * s;
    x[a + stride] = x0 * s + x1 * c;
  }
}

}  // namespace ts
