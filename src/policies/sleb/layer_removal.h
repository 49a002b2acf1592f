#pragma once
// Layer pruning baselines: SLEB (Song et al. 2024) and Shortened LLaMA without finetuning (Kim et
// al. 2024). The listed layers are removed: no token runs them and none writes K/V there.
//
// Both act the same at run time; the name records which search chose the layers (a profile must
// carry the same name).
#include "policies/layer_choice.h"
#include "runtime/policy.h"

namespace ts {

class LayerRemoval final : public Policy {
 public:
  explicit LayerRemoval(PolicyOptions& options) : Policy(options.spec()), layers_(options) {}
  static PolicyOptionList options() { return LayerChoice::options(); }

  void bind(const Model& model) override { layers_.bind(model, name()); }
  std::vector<HookClaim> claims() const override { return {{Hook::SelectTokens, layers_.layers()}}; }
  void select_tokens(const LayerInput&, TokenSelection& out) override {
    out.rows.clear();
    out.kv_for_unselected = false;
  }

 private:
  LayerChoice layers_;
};

}  // namespace ts
