#pragma once
// Per-token vector operations of the transformer block.
#include <cstddef>

namespace ts {

// y = x / rms(x) * weight
void rms_norm(const float* x, const float* weight, float* y, size_t n, float eps);
// In place: x = softmax(x)
void softmax(float* x, size_t n);
// gate = silu(gate) * up
void silu_mul(float* gate, const float* up, size_t n);

enum class RopeLayout {
  Interleaved,  // rotate pairs (x[2i], x[2i+1]): GGUF llama (Q/K rows permuted by the converter)
  Neox,         // rotate pairs (x[i], x[i + d/2]): qwen2 and other GPT-NeoX-style models
};

// Rotates the first `rot_dim` dims of one head vector at `pos` using inv_freq[rot_dim/2]; the
// remaining dims pass through unchanged.
void rope(float* x, size_t rot_dim, float pos, const float* inv_freq, RopeLayout layout);

}  // namespace ts
