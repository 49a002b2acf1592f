#pragma once
// Static attention removal, the degenerate case of Token Filtering (implementation note 1.6, 7.2):
// with Y = 0.5 and a 50% ratio every tail layer's target is 100%, so the filter drops attention
// from the last half of the layers for every token. This baseline does that at any ratio: every
// token skips Q/attention/O in the last (or first) round(ratio·L) layers; the FFN runs.
#include "policies/token_filter/layer_placement.h"
#include "runtime/policy.h"

namespace ts {

class AttentionRemoval final : public Policy {
 public:
  explicit AttentionRemoval(PolicyOptions& options);
  static PolicyOptionList options();  // declared once: parser, help, Python and README

  void bind(const Model& model) override;
  std::vector<HookClaim> claims() const override { return {{Hook::SkipAttention, layers_}}; }
  void skip_attention(const LayerInput&, const KvRows&, const RowSet&, AttentionSkips& out) override;

  const std::vector<uint32_t>& layers() const { return layers_; }

 private:
  double ratio_ = 0;
  Placement placement_ = Placement::Tail;
  bool cache_kv_ = false;
  std::vector<uint32_t> layers_;
};

}  // namespace ts
