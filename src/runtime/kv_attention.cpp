#include "runtime/kv_attention.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/simd_ops.h"

namespace ts {
namespace {

// Per-thread scratch, grown to the largest call.
struct Scratch {
  std::vector<CodeSegment> kseg, vseg;  // the head's segments, head-relative
  std::vector<float> pm, pl, pacc;      // one run's partials
  std::vector<float> p;                 // [g][run]: the run's numerators
  std::vector<uint32_t> rows;           // 0 .. run: a half-precision run's rows, for attn_gather
  std::vector<size_t> run_start;        // with numerators: each run's first key ...
  std::vector<float> run_m;             // ... and its max per query
};

// The segments of KV head kvh relative to the head: channel offsets from its first channel, range
// numbers from its first group's.
void head_segments(std::span<const KvSegment> segs, size_t base, std::vector<CodeSegment>& out) {
  out.clear();
  for (const KvSegment& s : segs)
    out.push_back({static_cast<uint32_t>(s.offset - base), s.size, s.group - segs.front().group});
}

}  // namespace

void attend_coded(const KvCache& cache, size_t layer, size_t kvh, const float* q, size_t n_q,
                  std::span<const uint32_t> positions, float scale, float* m, float* l, float* acc,
                  float* numerators) {
  thread_local Scratch s;
  const SimdOps& k = ops();
  const size_t hd = cache.head_dim(), n = positions.size(), base = kvh * hd;
  const bool kivi = cache.format().channel_keys;
  std::fill(m, m + n_q, -INFINITY);
  std::fill(l, l + n_q, 0.0f);
  std::fill(acc, acc + n_q * hd, 0.0f);
  head_segments(cache.segments(kvh, true), base, s.kseg);
  head_segments(cache.segments(kvh, false), base, s.vseg);
  static constexpr CodeRange kIdentity{1.0f, 0.0f};  // KIVI keys: their ranges go with the queries
  s.pm.resize(n_q);
  s.pl.resize(n_q);
  s.pacc.resize(n_q * hd);
  s.run_start.clear();
  s.run_m.clear();

  // Runs of consecutive coded rows go to attn_codes in one call, runs of half-precision rows (the
  // window, full-precision tokens) one row apart in memory to attn_chunk (attn_gather when the
  // numerators are wanted). Each run's partials merge into m, l, acc.
  const size_t kv_dim = cache.kv_dim();
  for (size_t j = 0; j < n;) {
    const size_t pos = positions[j];
    const KvRowRef kr = cache.key_row(layer, pos), vr = cache.value_row(layer, pos);
    size_t len = 1;
    if (kr.half) {
      while (j + len < n && positions[j + len] == pos + len &&
             cache.key_row(layer, pos + len).half == kr.half + len * kv_dim &&
             cache.value_row(layer, pos + len).half == vr.half + len * kv_dim)
        ++len;
      if (numerators) {  // the numerators of the run's rows, through the kernel that gives them
        s.rows.resize(len);
        std::iota(s.rows.begin(), s.rows.end(), 0u);
        s.p.resize(n_q * len);
        k.attn_gather(q, n_q, kr.half + base, vr.half + base, kv_dim, s.rows.data(), nullptr, len, hd, scale,
                      s.pm.data(), s.pl.data(), s.pacc.data(), s.p.data());
      } else {
        k.attn_chunk(q, n_q, kr.half + base, vr.half + base, kv_dim, len, hd, scale, s.pm.data(), s.pl.data(),
                     s.pacc.data());
      }
    } else {
      const size_t run = cache.coded_run(layer, pos, n - j);
      while (len < run && positions[j + len] == pos + len) ++len;
      CodedQueries queries{q, n_q};
      if (kivi) {  // each key block's per-channel ranges, folded into the queries by the kernel
        const size_t g = cache.format().group;
        queries.key_ranges = cache.key_block_ranges(layer, pos) + base;
        if (!cache.static_ranges()) {
          queries.key_ranges_stride = kv_dim;  // key_block_ranges: [layer][block][kv_dim]
          queries.block_rows = g;
          queries.skip = pos % g;
        }
      }
      const CodedRows krows{kr.codes + code_bytes(kr.bits, base),
                            cache.code_row_bytes(),
                            kr.bits,
                            s.kseg.data(),
                            s.kseg.size(),
                            kivi ? &kIdentity : kr.ranges + cache.segments(kvh, true).front().group,
                            kivi ? 0 : cache.range_stride()};
      const CodedRows vrows{vr.codes + code_bytes(vr.bits, base),
                            cache.code_row_bytes(),
                            vr.bits,
                            s.vseg.data(),
                            s.vseg.size(),
                            vr.ranges + cache.segments(kvh, false).front().group,
                            cache.range_stride()};
      if (numerators) s.p.resize(n_q * len);
      k.attn_codes(queries, krows, vrows, len, hd, scale, s.pm.data(), s.pl.data(), s.pacc.data(),
                   numerators ? s.p.data() : nullptr);
    }
    if (numerators)  // the run's numerators, relative to its own max until the rescaling below
      for (size_t g = 0; g < n_q; ++g) std::copy_n(&s.p[g * len], len, numerators + g * n + j);
    for (size_t g = 0; g < n_q; ++g) {  // online-softmax merge
      const float mx = std::max(m[g], s.pm[g]), a = std::exp(m[g] - mx), b = std::exp(s.pm[g] - mx);
      m[g] = mx;
      l[g] = a * l[g] + b * s.pl[g];
      for (size_t x = 0; x < hd; ++x) acc[g * hd + x] = a * acc[g * hd + x] + b * s.pacc[g * hd + x];
    }
    if (numerators) {
      s.run_start.push_back(j);
      s.run_m.insert(s.run_m.end(), s.pm.begin(), s.pm.end());
    }
    j += len;
  }
  if (!numerators) return;
  s.run_start.push_back(n);
  for (size_t r = 0; r + 1 < s.run_start.size(); ++r)
    for (size_t g = 0; g < n_q; ++g) {
      const float f = std::exp(s.run_m[r * n_q + g] - m[g]);
      for (size_t j = s.run_start[r]; j < s.run_start[r + 1]; ++j) numerators[g * n + j] *= f;
    }
}

}  // namespace ts
