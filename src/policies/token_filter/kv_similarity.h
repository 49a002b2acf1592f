#pragma once
// The score of Token Filtering (paper 003, Sec. 3.2, Eqs. 1-2): per KV head the cosine similarity
// of the current token's key (value) with the anchor key (value), their mean and variance over
// heads, and the variance-aware fusion of the key and value means into one score.
#include <cstddef>
#include <cstdint>
#include <span>

namespace ts {

struct HeadSimilarity {
  float mean = 0;  // s_k or s_v: the mean over heads of the per-head cosine
  float var = 0;   // sigma^2: their population variance over heads
};

// x and anchor hold n_heads rows of head_dim. A head whose vector or anchor is zero has cosine 0.
HeadSimilarity head_similarity(std::span<const float> x, std::span<const float> anchor, size_t n_heads,
                               size_t head_dim);

enum class Fusion : uint8_t {
  // Eq. 1 as printed (and Algorithm 1): alpha = sigma_v^-2 / (sigma_k^-2 + sigma_v^-2)
  // = sigma_k^2 / (sigma_k^2 + sigma_v^2), so the noisier side weighs more.
  Printed,
  // The prose's intent, inverse-variance weighting: alpha = sigma_v^2 / (sigma_k^2 + sigma_v^2).
  Intent,
  Mean,       // alpha = 1/2: Fig. 1's "added" up to scale
  KeyOnly,    // alpha = 1 (Table 6 key-only, the appendix's "Key-Sim")
  ValueOnly,  // alpha = 0
};

// alpha, the key's weight in S = alpha * s_k + (1 - alpha) * s_v. Two zero variances give 1/2.
float key_weight(Fusion fusion, float var_k, float var_v);

inline float fused_score(Fusion fusion, HeadSimilarity k, HeadSimilarity v) {
  const float alpha = key_weight(fusion, k.var, v.var);
  return alpha * k.mean + (1 - alpha) * v.mean;
}

}  // namespace ts
