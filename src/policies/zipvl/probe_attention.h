#pragma once
// ZipVL's estimate of a layer's attention matrix from a few probe queries (paper 004, Supp. A):
// the 64 most recent tokens and 64 at random positions, instead of every query.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "policies/zipvl/important_tokens.h"
#include "runtime/policy.h"

namespace ts {

// Ascending rows of an n-token batch: the last n_probes/2 and n_probes - n_probes/2 distinct
// random ones before them, drawn from (seed, layer). Every row when n <= n_probes or n_probes == 0
// (exact attention).
std::vector<uint32_t> probe_rows(size_t n, size_t n_probes, uint64_t seed, size_t layer);

// Causal softmax attention (scale 1/sqrt(head_dim), fp32) of the probe rows' queries, every query
// head, over the keys of all rows of `kv` (row j precedes row i when j < i); column sums and the
// count of (probe, head) rows that see each column. Needs kv.queries.
ColumnScores probe_attention(const KvRows& kv, const std::vector<uint32_t>& probes);

}  // namespace ts
