#pragma once
// TokenButler (paper 001) as a key-selecting policy: the predictor runs on the input of layer 0's
// attention (observe_layer_input), incrementally with its own caches (its attention's K/V and the
// importance keys of every position, per predicted (layer, head)); each query head of layers >= 1
// then attends to the budget(pos) keys with the largest predicted score q_imp·k_imp, the sinks, and
// an optional recent window, over the full KV cache.
//
//   tokenbutler:keep=F,predictor=FILE[,recent=0][,sinks=4][,first_layer=1]
#include <memory>
#include <string>

#include "policies/key_budget.h"
#include "policies/tokenbutler/butler_net.h"
#include "runtime/policy.h"

namespace ts {

class TokenButlerKeys final : public Policy {
 public:
  explicit TokenButlerKeys(PolicyOptions& options);

  void bind(const Model& model) override;
  std::vector<HookClaim> claims() const override {
    return {{Hook::ObserveLayerInput, {0}}, {Hook::SelectKeys, budget_.layers()}};
  }
  void truncate(size_t n_past) override;
  void observe_layer_input(const LayerInput& in) override;
  void select_keys(const KeyQuery& q, std::span<const uint32_t> candidates,
                   std::vector<uint32_t>& keys) const override;

 private:
  KeyBudget budget_;
  std::string path_;
  size_t recent_ = 0;
  ButlerWeights weights_;
  std::unique_ptr<ButlerNet> net_;
  ButlerCache cache_;
  ButlerActs acts_;  // the current batch's importance queries
  size_t batch_pos0_ = 0;
  std::vector<std::vector<float>> keys_;  // per (layer, head) slot: [pos][d] importance keys
};

}  // namespace ts
