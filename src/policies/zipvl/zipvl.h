#pragma once
// ZipVL (He et al. 2024; paper 004): per layer, the prompt's important tokens are those holding a
// fraction tau of the layer's attention, estimated from probe queries; only they run attention
// (over each other), and only their K/V stay in the layer's cache. Everything else runs dense.
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
// mixed=1 (the paper's Table 3 ablation, ZipVL v1): nothing is evicted; the KV cache is quantized
// per token (runtime/kv_cache.h, groups of `group` channels), the important tokens of each layer
// at `high` bits (16: half precision) and the others at `low` bits; generated tokens count as
// important. With the default sparse prefill the unimportant tokens still skip attention and only
// their K/V are kept, at low precision; prefill=dense is the KV-compression-only setting of Table 3.
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
  static PolicyOptionList options(Budget budget);  // declared once: parser, help, Python and README

  void bind(const Model& model) override;
  std::vector<HookClaim> claims() const override;
  std::optional<KvFormat> kv_format() const override;
  bool ranks_whole_calls() const override { return true; }
  bool reads_normed_input() const override { return false; }
  bool skips_by_queries() const override { return true; }
  void skip_attention(const LayerInput& in, const KvRows& kv, const RowSet& running,
                      AttentionSkips& out) override;
  void choose_kv_storage(const LayerInput& in, const KvRows& kv, std::span<KvStorage> storage) override;
  void evict(const KvCache& cache, Evictions& out) override;

  // Per model layer, the fraction of the last prompt's tokens kept, or with mixed=1 kept at high
  // precision (1 for layers left dense).
  const std::vector<double>& kept_ratios() const { return kept_ratios_; }

 private:
  Budget budget_;
  double tau_ = 0.975, keep_ = 1.0;
  size_t first_layer_ = 0, n_probes_ = 128;
  TokenRank rank_ = TokenRank::Normalized;
  uint64_t seed_ = 0;
  bool keep_last_ = false;
  bool dense_prefill_ = false;
  bool mixed_ = false;
  unsigned high_bits_ = 4, low_bits_ = 2;
  size_t group_ = 128;
  std::vector<uint8_t> important_;               // mixed: per row of the prompt at the current layer, in T
  std::vector<std::vector<uint32_t>> to_evict_;  // per layer, with dense_prefill: U after the prompt
  std::vector<double> kept_ratios_;
};

}  // namespace ts
