#pragma once
// Attention over a quantized KV cache (kv_cache.h): scores and value sums come straight from the
// packed codes through the fused kernel of simd_ops.h (attn_codes, one call per run of consecutive
// coded rows of one width), so a smaller cache is also less memory to stream; window and
// full-precision rows (KVSink's sinks, Preserve-First-N) are read as F16, and each run of coded
// rows at its own width (mixed precision).
#include <cstddef>
#include <cstdint>
#include <span>

#include "runtime/kv_cache.h"

namespace ts {

// The n_q queries (head_dim floats each, contiguous) of KV head kvh over the cached `positions`
// of `layer`, as attn_chunk's online-softmax partials: m[g] = max score, l[g] = sum exp(score -
// m[g]), acc[g * head_dim ..] = sum exp(score - m[g]) * v. With `numerators` (n_q x positions),
// also each exp(score - m[g]). No positions: l = 0.
void attend_coded(const KvCache& cache, size_t layer, size_t kvh, const float* q, size_t n_q,
                  std::span<const uint32_t> positions, float scale, float* m, float* l, float* acc,
                  float* numerators = nullptr);

}  // namespace ts
