#include "policies/zipvl/probe_attention.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/simd_ops.h"

namespace ts {
namespace {
// Probe queries per matrix product: bounds the score buffer at long contexts (exact mode).
constexpr size_t kProbeBlock = 64;
// Probes whose scores are held at once (run_item).
constexpr size_t kScoreProbes = 8;
}  // namespace

std::vector<uint32_t> probe_rows(size_t n, size_t n_probes, uint64_t seed, size_t layer) {
  std::vector<uint32_t> rows;
  if (n_probes == 0 || n <= n_probes) {
    rows.resize(n);
    for (size_t i = 0; i < n; ++i) rows[i] = static_cast<uint32_t>(i);
    return rows;
  }
  const size_t recent = n_probes / 2, n_random = n_probes - recent, pool = n - recent;
  // Floyd's sampling: n_random distinct rows of 0..pool-1.
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + layer);
  for (size_t top = pool - n_random; top < pool; ++top) {
    const auto r = static_cast<uint32_t>(rng() % (top + 1));
    rows.push_back(std::find(rows.begin(), rows.end(), r) == rows.end() ? r : static_cast<uint32_t>(top));
  }
  for (size_t i = pool; i < n; ++i) rows.push_back(static_cast<uint32_t>(i));
  std::sort(rows.begin(), rows.end());
  return rows;
}

ColumnScores probe_attention(const KvRows& kv, const std::vector<uint32_t>& probes) {
  TS_CHECK(kv.queries != nullptr, "probe attention needs the layer's queries");
  const SimdOps& k = ops();
  const size_t n = kv.rows->size(), hd = kv.head_dim, n_kv_heads = kv.kv_dim / hd;
  const size_t group = kv.n_heads / n_kv_heads, q_stride = kv.n_heads * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  ColumnScores out{std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  // Causal: column j can be non-zero in one row per head of every probe at row >= j.
  for (uint32_t i : probes) out.nnz[i] += static_cast<double>(kv.n_heads);
  for (size_t j = n - 1; j-- > 0;) out.nnz[j] += out.nnz[j + 1];

  // One work item per (KV head, block of probes), over the pool, in waves of kWave items: each
  // item's column sums apart, added in item order after its wave, so the sums do not depend on the
  // threads, and at most kWave items' sums and one score block per thread are held at once (with
  // probes=all a prompt has n / 64 blocks per KV head).
  constexpr size_t kWave = 16;
  const size_t n_blocks = (probes.size() + kProbeBlock - 1) / kProbeBlock, n_items = n_kv_heads * n_blocks;
  struct Scratch {
    std::vector<float> keys, queries, scores;
  };
  std::vector<Scratch> scratch(kv.pool ? static_cast<size_t>(kv.pool->size()) : 1);
  std::vector<std::vector<double>> sums(std::min(kWave, n_items));
  const auto run_item = [&](size_t item, Scratch& t, std::vector<double>& sum) {
    const size_t kvh = item / n_blocks, b = item % n_blocks * kProbeBlock;
    const size_t nb = std::min(kProbeBlock, probes.size() - b);
    const size_t n_keys = probes[b + nb - 1] + 1;  // no probe of the block sees further
    t.keys.resize(n_keys * hd);
    for (size_t j = 0; j < n_keys; ++j) std::copy_n(kv.keys + j * kv.kv_dim + kvh * hd, hd, &t.keys[j * hd]);
    sum.assign(n_keys, 0.0);
    // The scores of kScoreProbes probes at a time: a whole block's would be 64 x group x n_keys
    // floats (59 MB a thread on Qwen 0.5B at 32K). Each score is the same dot product either way,
    // and the rows add to the sums in the block's order.
    for (size_t p0 = 0; p0 < nb; p0 += kScoreProbes) {
      const size_t np = std::min(kScoreProbes, nb - p0), n_q = np * group;
      const size_t seen_max = probes[b + p0 + np - 1] + 1;
      t.queries.resize(n_q * hd);
      t.scores.resize(n_q * seen_max);
      for (size_t p = 0; p < np; ++p)
        std::copy_n(kv.queries + probes[b + p0 + p] * q_stride + kvh * group * hd, group * hd,
                    &t.queries[p * group * hd]);
      k.gemm_f32(t.keys.data(), seen_max, t.queries.data(), hd, n_q, hd, t.scores.data(), seen_max);
      for (size_t r = 0; r < n_q; ++r) {
        const size_t seen = probes[b + p0 + r / group] + 1;
        float* s = &t.scores[r * seen_max];
        for (size_t j = 0; j < seen; ++j) s[j] *= scale;
        k.softmax(s, seen);
        for (size_t j = 0; j < seen; ++j) sum[j] += s[j];
      }
    }
  };
  for (size_t w0 = 0; w0 < n_items; w0 += kWave) {
    const size_t wave = std::min(kWave, n_items - w0);
    const auto run_wave = [&](size_t b, size_t e, int thread) {
      for (size_t i = b; i < e; ++i) run_item(w0 + i, scratch[static_cast<size_t>(thread)], sums[i]);
    };
    parallel_for(kv.pool, wave, run_wave);
    for (size_t i = 0; i < wave; ++i)
      for (size_t j = 0; j < sums[i].size(); ++j) out.sum[j] += sums[i][j];
  }
  return out;
}

}  // namespace ts
