#pragma once
// SnapKV (Li et al. 2024), evicting step by step as paper 001's protocol runs it: a token's
// importance is the attention it received from the last `window` queries (the observation window,
// default 32), max-pooled over neighbouring positions (kernel `pool`, default 7) so that the
// neighbours of a salient token survive with it. The observation window itself is kept (up to
// half the budget), as SnapKV keeps it after prefill.
#include "policies/evicting_keys.h"

namespace ts {

class SnapKVKeys final : public EvictingKeys {
 public:
  explicit SnapKVKeys(PolicyOptions& options);
  static PolicyOptionList options();  // declared once: parser, help, Python and README

 private:
  void collect(HeadState& s, std::span<const uint32_t> keys, std::span<const float> probs) const override;
  float importance(const HeadState& s, uint32_t j, size_t pos) const override;
  size_t protected_recent(size_t budget) const override { return std::min(window_, budget / 2); }
  // The window subtracts the probabilities it added: a position's sum returns to ~0 by rounding,
  // and such positions tie on the last bits, so prefill and decode must compute them alike.
  bool collects_observed_attention() const override { return false; }

  size_t window_ = 32, pool_ = 7;
};

}  // namespace ts
