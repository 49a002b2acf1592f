#include "policies/token_filter/kv_similarity.h"

#include <algorithm>
#include <cmath>

#include "kernels/simd_ops.h"

namespace ts {
namespace {
// Keeps the weights defined when a variance is 0 (one KV head, or heads that agree exactly).
constexpr float kVarianceFloor = 1e-12f;
}  // namespace

HeadSimilarity head_similarity(std::span<const float> x, std::span<const float> anchor, size_t n_heads,
                               size_t head_dim) {
  const SimdOps& k = ops();
  double sum = 0, sum_sq = 0;
  for (size_t h = 0; h < n_heads; ++h) {
    const float* a = &x[h * head_dim];
    const float* b = &anchor[h * head_dim];
    const float norms = std::sqrt(k.dot_f32(a, a, head_dim)) * std::sqrt(k.dot_f32(b, b, head_dim));
    const double c = norms > 0 ? k.dot_f32(a, b, head_dim) / norms : 0.0;
    sum += c;
    sum_sq += c * c;
  }
  const double mean = sum / static_cast<double>(n_heads);
  const double var = std::max(0.0, sum_sq / static_cast<double>(n_heads) - mean * mean);
  return {static_cast<float>(mean), static_cast<float>(var)};
}

float key_weight(Fusion fusion, float var_k, float var_v) {
  const float vk = var_k + kVarianceFloor, vv = var_v + kVarianceFloor;
  switch (fusion) {
    case Fusion::Printed:
      return vk / (vk + vv);
    case Fusion::Intent:
      return vv / (vk + vv);
    case Fusion::Mean:
      return 0.5f;
    case Fusion::KeyOnly:
      return 1.0f;
    case Fusion::ValueOnly:
      return 0.0f;
  }
  return 0.5f;
}

}  // namespace ts
