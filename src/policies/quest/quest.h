#pragma once
// Quest (Tang et al. 2024): the cache is cut into pages of `page` positions; each complete page
// keeps the element-wise min and max of its keys per channel, and a query scores a page by the
// upper bound sum_c max(q_c·min_c, q_c·max_c) of its logits there. Each query head reads its own
// (partial) page plus as many best-scoring earlier pages as the rest of budget(pos) needs, and
// the sinks. The full cache is kept. (Paper 001's code used |q|·max only and let the simulation
// see keys of future tokens in the current page; this is the original bound, causal.)
//
// Since max ≥ min, the bound is q⁺·max + q⁻·min (q⁺, q⁻ the positive and negative parts of q):
// one dot product of [q⁺, q⁻] with the page's [max, min]. shared=1 lets the query heads of a KV
// head share one selection ranked by the sum of their bounds, which is the same dot product with
// the group's summed parts; the group then reads as many keys as one head's budget, instead of
// the union of its heads' lists (the paper selects per query head; shared=0, the default).
#include "policies/key_budget.h"
#include "runtime/policy.h"

namespace ts {

class QuestKeys final : public Policy {
 public:
  explicit QuestKeys(PolicyOptions& options);
  static PolicyOptionList options();  // declared once: parser, help, Python and README

  void bind(const Model& model) override;
  std::vector<HookClaim> claims() const override { return {{Hook::SelectKeys, budget_.layers()}}; }
  void truncate(size_t n_past) override;
  void prepare_keys(const QueryRows& q) override;
  void select_keys(const KeyQuery& q, std::span<const uint32_t> candidates,
                   std::vector<uint32_t>& keys) const override;
  bool selects_per_group() const override { return shared_; }

 private:
  struct LayerPages {
    size_t ready = 0;  // pages whose bounds are known
    // Per KV head, per page: max[head_dim] then min[head_dim].
    std::vector<std::vector<float>> bounds;
  };
  KeyBudget budget_;
  size_t page_ = 16;
  bool shared_ = false;
  size_t head_dim_ = 0;
  std::vector<LayerPages> layers_;
  std::vector<float> key_;  // one cached key row, decoded (prepare_keys runs on one thread)
};

}  // namespace ts
