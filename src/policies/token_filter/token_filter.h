#pragma once
// Token Filtering (paper 003, "Leveraging KV Similarity for Online Structured Pruning in LLMs"):
// in the filtered layers a token whose key and value resemble the running anchors of the keys and
// values before it skips the layer's attention (Q projection, attention, O projection); its FFN
// runs. No calibration: a per-layer threshold follows the skip rate to its target online.
//
//   tokenfilter:ratio=0.5[,tail=0.5][,placement=tail|head|uniform][,select=kv|k|v|random]
//               [,fusion=printed|intent|mean][,anchor=ema|mean][,decay=0.9][,anchor_update=after|before]
//               [,variance=instant|running][,update=eq4|alg1][,control=layer|global][,lr=0.01]
//               [,threshold=0.5][,state=sequence|run][,decide=token|call][,kv=drop|cache][,seed=N]
//
// ratio is P_global, the fraction of all (token, layer) attention calls skipped; the round(tail·L)
// filtered layers each aim at P = ratio·L / their count (Eq. 3; an error above 1). Defaults follow
// the implementation note (../shared/notes/003_token_filtering.md, section 6); the alternatives
// the paper's contradictions leave open are options:
//   placement  tail (the method), head or uniform (Table 5's ablations; uniform takes no tail=)
//   select     kv fused score, k or v alone (Table 6), random: skip with probability P (baseline)
//   fusion     printed Eq. 1 (more weight to the side varying more over heads), intent (inverse-
//              variance weighting, the prose), mean (plain average, Fig. 1's "added")
//   anchor     ema (A <- decay·A + (1-decay)·k, Sec. 3.2) or mean (the exact causal mean, Alg. 1),
//              updated after the token's similarity (a mean of the previous tokens) or before (Alg. 1)
//   variance   the variance over heads of this token (Alg. 1) or its EMA with the same decay
//   update     eq4: T += lr·(S - P) (stable), alg1: T += lr·(P - S) (the printed sign)
//   control    S and P of the layer (Eq. 4) or of all filtered layers together (Alg. 1's global rho)
//   state      controller (T, S) restarts with each sequence, or carries across the run
//   decide     token: every token decides (prefill and decode), call: one decision per layer and
//              forward call from its last token, applied to all its tokens (Alg. 1 literally)
//   kv         drop: skipped tokens' K/V are not cached (Fig. 3's memory saving), cache: they are
// Keys are post-RoPE (as cached). The first token of a sequence seeds the anchors and never
// skips. Anchors, thresholds and counts are kept per position so that a truncated sequence (prefix
// reuse) continues exactly as if the suffix had never run: 2·kv_dim floats per filtered layer and
// position.
#include <optional>

#include "policies/token_filter/kv_similarity.h"
#include "policies/token_filter/layer_placement.h"
#include "policies/token_filter/skip_controller.h"
#include "runtime/policy.h"

namespace ts {

class TokenFilter final : public Policy {
 public:
  explicit TokenFilter(PolicyOptions& options);

  void bind(const Model& model) override;
  std::vector<HookClaim> claims() const override { return {{Hook::SkipAttention, layers_}}; }
  bool ranks_whole_calls() const override { return per_call_; }
  void truncate(size_t n_past) override;
  void skip_attention(const LayerInput& in, const KvRows& kv, const RowSet& running,
                      AttentionSkips& out) override;

  const std::vector<uint32_t>& layers() const { return layers_; }
  double layer_target() const { return controller_.target; }  // P of each filtered layer
  // The controller of a filtered layer now: its threshold and the decisions it counts.
  double threshold(uint32_t layer) const { return controller_of(state_[layer]).threshold; }
  SkipCount skips(uint32_t layer) const { return controller_of(state_[layer]).count; }

 private:
  enum class Select : uint8_t { Kv, Key, Value, Random };
  struct Controller {
    double threshold = 0;
    SkipCount count;
  };
  // What a filtered layer knows after one position; its anchors are the matching rows of anchors.
  struct Step {
    uint32_t pos = 0;
    uint32_t n_tokens = 0;       // tokens averaged into the anchors
    float var_k = 0, var_v = 0;  // running variance over heads (variance=running)
    Controller controller;       // state=sequence
  };
  struct LayerState {
    std::vector<Step> steps;
    std::vector<float> anchors;  // per step: anchor key then anchor value, kv_dim each
    Controller live;             // state=run
  };

  // The controller deciding the layer's next token (a new sequence's: the initial one).
  Controller& controller_of(LayerState& s) { return run_state_ ? s.live : s.steps.back().controller; }
  const Controller& controller_of(const LayerState& s) const {
    return run_state_ ? s.live : s.steps.empty() ? initial_ : s.steps.back().controller;
  }
  // Moves the layer's anchors past one token; returns its similarity score (nullopt: the first).
  std::optional<float> advance(LayerState& s, size_t pos, const float* key, const float* value);
  void update_anchor(float* anchor, const float* x, uint32_t n_before) const;
  bool decide(size_t layer, float score);
  SkipCount observed(size_t layer) const;

  // Options.
  double ratio_ = 0.5;
  std::optional<double> tail_;
  Placement placement_ = Placement::Tail;
  Select select_ = Select::Kv;
  Fusion fusion_ = Fusion::Printed;
  bool exact_mean_ = false, anchor_before_ = false, running_variance_ = false;
  double decay_ = 0.9;
  bool global_control_ = false, run_state_ = false, per_call_ = false, cache_kv_ = false;
  uint64_t seed_ = 0;
  ControllerParams controller_;

  // Bound to the model.
  std::vector<uint32_t> layers_;
  size_t kv_dim_ = 0, head_dim_ = 0, n_kv_heads_ = 0;
  Controller initial_;
  std::vector<LayerState> state_;  // per model layer (only the filtered ones are used)
};

}  // namespace ts
