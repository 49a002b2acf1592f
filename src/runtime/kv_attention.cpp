#include "runtime/kv_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/simd_ops.h"

namespace ts {
namespace {

// Per-thread scratch, grown to the largest call.
struct Scratch {
  std::vector<float> qs;       // [g][hd]: scaled queries
  std::vector<float> qk;       // [g][hd]: KIVI: queries times the block's per-channel key scales
  std::vector<float> qsum;     // [g][segment]: sums of scaled queries over each key segment
  std::vector<float> qmin;     // [g]: KIVI: query . block minima
  std::vector<float> scores;   // [g][j]
  std::vector<float> zero;     // [g][segment]: sum of p * value minimum per value segment
  std::vector<float> dots, a;  // [g]
};

}  // namespace

void attend_coded(const KvCache& cache, size_t layer, size_t kvh, const float* q, size_t n_q,
                  std::span<const uint32_t> positions, float scale, float* m, float* l, float* acc,
                  float* numerators) {
  thread_local Scratch s;
  const SimdOps& k = ops();
  const size_t hd = cache.head_dim(), n = positions.size(), base = kvh * hd;
  const bool kivi = cache.format().channel_keys;
  const std::span<const KvSegment> kseg = cache.segments(kvh, true), vseg = cache.segments(kvh, false);
  std::fill(acc, acc + n_q * hd, 0.0f);
  if (n == 0) {
    std::fill(l, l + n_q, 0.0f);
    return;
  }
  s.qs.resize(n_q * hd);
  s.qk.resize(n_q * hd);
  s.qsum.assign(n_q * kseg.size(), 0.0f);
  s.qmin.resize(n_q);
  s.scores.resize(n_q * n);
  s.zero.assign(n_q * vseg.size(), 0.0f);
  s.dots.resize(n_q);
  s.a.resize(n_q);
  for (size_t i = 0; i < n_q * hd; ++i) s.qs[i] = q[i] * scale;
  for (size_t g = 0; g < n_q; ++g)
    for (size_t si = 0; si < kseg.size(); ++si)
      for (size_t c = 0; c < kseg[si].size; ++c)
        s.qsum[g * kseg.size() + si] += s.qs[g * hd + kseg[si].offset - base + c];

  // Scores: q . (scale * code + min) = scale * (q . code) + min * sum(q) per segment; KIVI folds
  // the per-channel scales into the query once per key block.
  size_t block = SIZE_MAX;
  for (size_t j = 0; j < n; ++j) {
    const size_t pos = positions[j];
    const KvRowRef r = cache.key_row(layer, pos);
    if (r.half) {
      for (size_t g = 0; g < n_q; ++g) s.scores[g * n + j] = k.dot_f16_f32(r.half + base, &s.qs[g * hd], hd);
      continue;
    }
    if (kivi) {
      if (pos / cache.format().group != block) {
        block = pos / cache.format().group;
        const CodeRange* cr = cache.key_block_ranges(layer, pos) + base;
        for (size_t g = 0; g < n_q; ++g) {
          float qm = 0.0f;
          for (size_t c = 0; c < hd; ++c) {
            s.qk[g * hd + c] = s.qs[g * hd + c] * cr[c].scale;
            qm += s.qs[g * hd + c] * cr[c].min;
          }
          s.qmin[g] = qm;
        }
      }
      k.dot_codes(r.codes + code_bytes(r.bits, base), r.bits, hd, s.qk.data(), hd, n_q, s.dots.data());
      for (size_t g = 0; g < n_q; ++g) s.scores[g * n + j] = s.dots[g] + s.qmin[g];
      continue;
    }
    for (size_t g = 0; g < n_q; ++g) s.scores[g * n + j] = 0.0f;
    for (size_t si = 0; si < kseg.size(); ++si) {
      const KvSegment& seg = kseg[si];
      const CodeRange cr = r.ranges[seg.group];
      k.dot_codes(r.codes + code_bytes(r.bits, seg.offset), r.bits, seg.size, &s.qs[seg.offset - base], hd,
                  n_q, s.dots.data());
      for (size_t g = 0; g < n_q; ++g)
        s.scores[g * n + j] += cr.scale * s.dots[g] + cr.min * s.qsum[g * kseg.size() + si];
    }
  }

  for (size_t g = 0; g < n_q; ++g) {
    float* sc = &s.scores[g * n];
    m[g] = *std::max_element(sc, sc + n);
    float sum = 0.0f;
    for (size_t j = 0; j < n; ++j) sum += sc[j] = std::exp(sc[j] - m[g]);
    l[g] = sum;
    if (numerators) std::copy(sc, sc + n, numerators + g * n);
  }

  // Values: p * (scale * code + min) = (p * scale) * code, plus p * min added once per segment.
  for (size_t j = 0; j < n; ++j) {
    const KvRowRef r = cache.value_row(layer, positions[j]);
    if (r.half) {
      for (size_t g = 0; g < n_q; ++g) k.axpy_f16(s.scores[g * n + j], r.half + base, acc + g * hd, hd);
      continue;
    }
    for (size_t si = 0; si < vseg.size(); ++si) {
      const KvSegment& seg = vseg[si];
      const CodeRange cr = r.ranges[seg.group];
      for (size_t g = 0; g < n_q; ++g) {
        s.a[g] = s.scores[g * n + j] * cr.scale;
        s.zero[g * vseg.size() + si] += s.scores[g * n + j] * cr.min;
      }
      k.axpy_codes(r.codes + code_bytes(r.bits, seg.offset), r.bits, seg.size, s.a.data(), n_q,
                   acc + seg.offset - base, hd);
    }
  }
  for (size_t g = 0; g < n_q; ++g)
    for (size_t si = 0; si < vseg.size(); ++si)
      for (size_t c = 0; c < vseg[si].size; ++c)
        acc[g * hd + vseg[si].offset - base + c] += s.zero[g * vseg.size() + si];
}

}  // namespace ts
