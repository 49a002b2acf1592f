#pragma once
// ZipVL (He et al. 2024; paper 004): per layer, the prompt's important tokens are those holding a
// fraction tau of the layer's attention, estimated from probe queries; only they run attention
// (over each other), and only their K/V stay in the layer's cache. Everything else runs dense.
//
//   zipvl:[tau=0.975][,probes=128|all][,score=normalized|sum][,seed=N][,keep_last=0|1][,prefill=sparse|dense]
//   fixedratio:keep=R[,after=2][,probes=..][,score=..][,seed=..][,keep_last=..]
//
// Per layer at the first call of a sequence (the prompt, one batch): probe attention (64 recent +
// 64 random queries; probes=all: every query, exact), p = the fewest tokens whose column sums reach
// tau of the total (eq. 7), T = the p tokens of largest normalized score (eq. 8-9; score=sum: raw
// column sums). Tokens outside T skip Q/attention/O at that layer (their attention output is the
// paper's zero padding), and their K/V are not cached there: the layer's cache is ragged, positions
// keep their numbers. keep_last=1 always keeps the prompt's last token, whose state yields the
// first generated token (a deviation: the paper forces nothing). Later calls (decode) attend over
// the kept tokens and append their own K/V, never re-scored (the note's decision 11a).
// prefill=dense (an ablation): every prompt token attends densely and the same T only decides
// which K/V the layer keeps after the prompt (KV-cache compression alone).
//
// fixedratio is the fixed-ratio baseline (paper Table 3 "Fixed", FastV's schedule): the same
// estimate and ranking, but p = keep * n at every layer from `after` on (FastV keeps the first two
// layers dense).
#include <optional>

#include "policies/zipvl/important_tokens.h"
#include "runtime/policy.h"

namespace ts {

class ZipVL final : public Policy {
 public:
  enum class Budget { Tau, Fixed };
  ZipVL(PolicyOptions& options, Budget budget);

  void bind(const Model& model) override;
  std::vector<HookClaim> claims() const override;
  bool ranks_whole_calls() const override { return true; }
  bool skips_by_queries() const override { return true; }
  void skip_attention(const LayerInput& in, const KvRows& kv, const RowSet& running,
                      AttentionSkips& out) override;
  void evict(const KvCache& cache, Evictions& out) override;

  // Per model layer, the fraction of the last prompt's tokens kept (1 for layers left dense).
  const std::vector<double>& kept_ratios() const { return kept_ratios_; }

 private:
  Budget budget_;
  double tau_ = 0.975, keep_ = 1.0;
  size_t first_layer_ = 0, n_probes_ = 128;
  TokenRank rank_ = TokenRank::Normalized;
  uint64_t seed_ = 0;
  bool keep_last_ = false;
  bool dense_prefill_ = false;
  std::vector<std::vector<uint32_t>> to_evict_;  // per layer, with dense_prefill: U after the prompt
  std::vector<double> kept_ratios_;
};

}  // namespace ts
