#pragma once
// StreamingLLM (Xiao et al. 2024) as a key selection: the first `sinks` positions plus a recent
// window, the rest of the cache unread. window=N fixes the window; keep=F sizes it per query as
// budget(pos) - sinks (paper 001's code: the sinks count towards the budget).
#include <optional>

#include "policies/key_budget.h"
#include "runtime/policy.h"

namespace ts {

class StreamingKeys final : public Policy {
 public:
  explicit StreamingKeys(PolicyOptions& options);
  static PolicyOptionList options();  // declared once: parser, help, Python and README

  void bind(const Model& model) override { budget_.bind(model, name()); }
  std::vector<HookClaim> claims() const override {
    return {{Hook::SelectKeys, budget_.layers()}, {Hook::Evict, budget_.layers()}};
  }
  size_t rewind_point(size_t n) const override { return window_start(n) >= evicted_to_ ? n : 0; }
  void truncate(size_t n_past) override;
  void select_keys(const KeyQuery& q, std::span<const uint32_t> candidates,
                   std::vector<uint32_t>& keys) const override;
  void evict(const KvCache& cache, Evictions& out) override;

 private:
  std::optional<uint64_t> window_;
  KeyBudget budget_;
  size_t evicted_to_ = 0;  // positions [sinks, evicted_to_) have left every layer's cache

  // The first recent position the query at pos reads (nondecreasing in pos).
  size_t window_start(size_t pos) const;
};

}  // namespace ts
