#pragma once
// RoPE geometry. The per-token vector operations themselves (RMSNorm, SwiGLU, softmax, the
// RoPE rotation) are in SimdOps, with a scalar reference and SIMD versions.
#include <cstddef>

namespace ts {

enum class RopeLayout {
  Interleaved,  // rotate pairs (x[2i], x[2i+1]): GGUF llama (Q/K rows permuted by the converter)
  Neox,         // rotate pairs (x[i], x[i + d/2]): qwen2 and other GPT-NeoX-style models
};

// Per-dimension rotation tables for one position, so that the rotation of every head is
// y[j] = x[j] * cos_t[j] + x[partner(j)] * sin_t[j], partner being the other member of j's pair
// (sin_t carries the sign). Computed once per token and shared by all heads and layers.
void rope_tables(float pos, const float* inv_freq, size_t rot_dim, RopeLayout layout, float* cos_t,
                 float* sin_t);

}  // namespace ts
