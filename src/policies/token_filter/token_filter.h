#pragma once
// Token Filtering (paper 003, "Leveraging KV Similarity for Online Structured Pruning in LLMs"):
// in the filtered layers a token whose key and value resemble the running anchors of the keys and
// values before it skips the layer's attention (Q projection, attention, O projection); its FFN
// runs. No calibration: a per-layer threshold follows the skip rate to its target online.
//
// ratio is P_global, the fraction of all (token, layer) attention calls skipped; the round(tail·L)
// filtered layers each aim at P = ratio·L / their count (Eq. 3; an error above 1). Defaults follow
// the implementation note (../shared/notes/003_token_filtering.md, section 6); the alternatives
// the paper's contradictions leave open are options. `placement` filters the tail layers (the
// method), or the head or all layers uniformly (Table 5's ablations). `select` scores a token by
// the fused K and V similarities, by K or V alone (Table 6), or, as a baseline, skips it at random
// with probability P. `fusion` weights as printed in Eq. 1 (more weight to the side varying more
// over heads), as the prose intends (inverse-variance weighting), or plainly averages (Fig. 1's
// "added"). `anchor` is an EMA, A <- decay·A + (1-decay)·k (Sec. 3.2), or the exact causal mean
// (Alg. 1); `anchor_update` updates it after the token's similarity (which then compares with a
// mean of the previous tokens) or before it (Alg. 1). `variance` is the variance over heads of this
// token (Alg. 1) or its EMA with the same decay. `update` is Eq. 4's T += lr·(S - P), which is
// stable, or T += lr·(P - S) with Alg. 1's printed sign. `control` takes S and P of the layer
// (Eq. 4) or of all filtered layers together (Alg. 1's global rho). With `state` the controller
// (T, S) restarts with each sequence or carries across the run. With `decide` every token decides
// (prefill and decode), or one decision per layer and forward call, taken from its last token,
// applies to all its tokens (Alg. 1 literally). With `kv` skipped tokens' K/V are not cached
// (Fig. 3's memory saving) or are cached.
// Keys are post-RoPE (as cached). The first token of a sequence seeds the anchors and never
// skips. Thresholds and counts are kept per position so that a truncated sequence (prefix reuse)
// continues exactly as if the suffix had never run. The anchors (2·kv_dim floats per filtered
// layer) depend on every float key and value before them, which the F16 cache does not keep, so
// they are kept for the latest positions and at checkpoints: a rewind further back than the
// recent ones restarts from the checkpoint before it (rewind_point) and recomputes the rest.
// Per position they would outweigh the F16 cache itself (189 MB for SmolLM2 at 8K positions).
// With state=run the controller is never rewound: tokens that run again after a rewind count again.
#include <optional>

#include "policies/token_filter/kv_similarity.h"
#include "policies/token_filter/layer_placement.h"
#include "policies/token_filter/skip_controller.h"
#include "runtime/policy.h"

namespace ts {

class TokenFilter final : public Policy {
 public:
  explicit TokenFilter(PolicyOptions& options);
  static PolicyOptionList options();  // declared once: parser, help, Python and README

  void bind(const Model& model) override;
  std::vector<HookClaim> claims() const override { return {{Hook::SkipAttention, layers_}}; }
  bool ranks_whole_calls() const override { return per_call_; }
  size_t rewind_point(size_t n) const override;
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
  // What a filtered layer knows after one position.
  struct Step {
    uint32_t pos = 0;
    uint32_t n_tokens = 0;       // tokens averaged into the anchors
    float var_k = 0, var_v = 0;  // running variance over heads (variance=running)
    Controller controller;       // state=sequence
  };
  // The anchors after a step: anchor key then anchor value, kv_dim each. Those of steps
  // recent_first.. are rows of recent; those of every kCheckpoint-th step (steps kCheckpoint - 1,
  // 2·kCheckpoint - 1, ...) rows of checkpoints.
  struct LayerState {
    std::vector<Step> steps;
    std::vector<float> recent;
    size_t recent_first = 0;
    std::vector<float> checkpoints;
    Controller live;  // state=run
    // How many steps are before position pos; and how many of them a truncation can keep exactly.
    size_t steps_before(size_t pos) const;
    size_t restorable(size_t n_steps) const;
  };
  static constexpr size_t kCheckpoint = 256;
  float* latest_anchors(LayerState& s) { return s.recent.data() + s.recent.size() - 2 * kv_dim_; }

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
