#pragma once
// Oracle (paper 001's upper bound): each query head attends to the budget keys with the largest
// true logits q·k (the cached F16 keys the attention reads) plus the sinks.
#include "policies/key_budget.h"
#include "runtime/policy.h"

namespace ts {

class OracleKeys final : public Policy {
 public:
  explicit OracleKeys(PolicyOptions& options) : Policy(options.spec()), budget_(options, -1) {}
  static PolicyOptionList options() { return KeyBudget::options(); }

  void bind(const Model& model) override { budget_.bind(model, name()); }
  std::vector<HookClaim> claims() const override { return {{Hook::SelectKeys, budget_.layers()}}; }
  void select_keys(const KeyQuery& q, std::span<const uint32_t> candidates,
                   std::vector<uint32_t>& keys) const override;

 private:
  KeyBudget budget_;
};

}  // namespace ts
