#pragma once
// H2O (Zhang et al. 2023), evicting step by step: a token's importance is the attention it has
// collected over all steps so far (accumulated softmax probability); half of the budget is the
// recent window H2O always keeps, the other half the heavy hitters. Paper 001's code ranked by
// the current row's logit instead; this is the original accumulated score.
#include "policies/evicting_keys.h"

namespace ts {

class H2OKeys final : public EvictingKeys {
 public:
  explicit H2OKeys(PolicyOptions& options) : EvictingKeys(options) {}
  static PolicyOptionList options() { return EvictingKeys::options(); }

 private:
  void collect(HeadState& s, std::span<const uint32_t> keys, std::span<const float> probs) const override {
    for (size_t j = 0; j < keys.size(); ++j) s.attention[keys[j]] += probs[j];
  }
  float importance(const HeadState& s, uint32_t j, size_t) const override { return s.attention[j]; }
  size_t protected_recent(size_t budget) const override { return budget / 2; }
};

}  // namespace ts
