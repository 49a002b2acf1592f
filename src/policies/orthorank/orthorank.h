#pragma once
// OrthoRank (Shin, Oh, Oh 2025; paper 000): in the chosen layers only the tokens most orthogonal
// to the attention sink run the layer; the others keep their hidden state and compute K/V only.
//
// Score of token i: |h̄_0 · h̄_i|, h̄ = the layer's RMSNorm_attn output (gain included), h̄_0 the
// sink at position 0, whose score is +inf (never selected unless every token is). The tokens whose
// score ranks among the ⌊ratio·N⌋ smallest run the layer (ContextRank: the prompt at once, later
// tokens by the decode rule). ratio defaults to the profile's, else 0.333. The other options are
// the paper's ablations (Table 5): reverse (largest scores) or random selection, the score on the
// residual stream h instead of h̄, and no K/V for unselected tokens.
#include "policies/layer_choice.h"
#include "policies/orthorank/context_rank.h"
#include "runtime/policy.h"

namespace ts {

class OrthoRank final : public Policy {
 public:
  explicit OrthoRank(PolicyOptions& options);
  static PolicyOptionList options();  // declared once: parser, help, Python and README

  void bind(const Model& model) override;
  std::vector<HookClaim> claims() const override { return {{Hook::SelectTokens, layers_.layers()}}; }
  bool ranks_whole_calls() const override { return true; }
  void truncate(size_t n_past) override;
  void select_tokens(const LayerInput& in, TokenSelection& out) override;

  double ratio() const { return ratio_; }

 private:
  enum class Select { Ortho, Reverse, Random };
  float score(const LayerInput& in, size_t t, std::span<const float> sink) const;

  std::optional<double> ratio_option_;
  double ratio_ = 0.333;
  LayerChoice layers_;
  Select select_ = Select::Ortho;
  uint64_t seed_ = 0;
  bool score_residual_ = false;
  bool kv_for_unselected_ = true;

  struct LayerState {
    std::vector<float> sink;  // the sink's state the scores use, set by the batch holding position 0
    ContextRank rank;
  };
  std::vector<LayerState> state_;  // per model layer
};

}  // namespace ts
