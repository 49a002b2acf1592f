#pragma once
// Queries that keys of 4 or 2 bits score without rounding error (kv_codes.h: attention rounds the
// query to 8 bits per 32 channels): multiples of 1/64 within +-127/64, with +-127/64 in every
// block, so the rounding step is 1/64 and every channel sits on it. Tests of the runtime around
// the kernel (runs, windows, merges) compare with exact dot products through them.
#include <algorithm>
#include <cmath>
#include <vector>

namespace ts {

inline std::vector<float> exactly_rounded_queries(std::vector<float> q, size_t head_dim) {
  for (size_t i = 0; i < q.size(); ++i) {
    const size_t c = i % head_dim;
    q[i] = c % 32 == 0 ? 127.0f / 64 : std::clamp(std::nearbyint(q[i] * 32.0f), -126.0f, 126.0f) / 64;
  }
  return q;
}

}  // namespace ts
