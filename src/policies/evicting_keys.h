#pragma once
// The eviction baselines of paper 001 (H2O, SnapKV) simulated step by step, as its protocol
// requires: each (layer >= first_layer, query head; KV head with shared=1) keeps an active set of
// positions; at every
// step the new token joins, and while more than budget(pos) non-sink tokens are active the one
// with the lowest importance is evicted for good, except the `recent` newest (protected because
// they have had no chance to collect attention). The query then attends to the active set (sinks
// included) and its attention probabilities update the importance. An evicted position is never
// attended by this state's heads again; it leaves the layer's KV cache once no state of the layer
// holds it (evict: after a batch, at most every 64 positions or an eighth of the sequence, and
// when worth_evicting).
//
// A whole forward batch is simulated row by row in prepare_keys, so prefill and decode follow the
// same per-step rule: within a batch each row's probabilities are computed there, before the next
// row evicts. A one-row batch (a decode step) takes them from the attention itself instead
// (observe_attention), which computes them anyway, split across the threads. The state cannot be
// rewound: calls are never shared (see rewind_point), and truncate only restarts a sequence.
//
// shared=1 keeps one active set per KV head instead of per query head: the importance of a
// position is the sum over the group's query heads of what each collected (as kvpress scores a
// KV head by its queries' attention), and the group attends the set together, so decode reads
// each kept key once for the whole group, as dense GQA attention does. The papers evict per
// query head (shared=0, the default).
#include <cstdint>
#include <vector>

#include "policies/key_budget.h"
#include "runtime/policy.h"

namespace ts {

class EvictingKeys : public Policy {
 public:
  EvictingKeys(PolicyOptions& options);
  static PolicyOptionList options();  // declared once: parser, help, Python and README

  void bind(const Model& model) override;
  bool selects_per_group() const override { return shared_; }
  std::vector<HookClaim> claims() const override {
    std::vector<HookClaim> claims{{Hook::SelectKeys, budget_.layers()}, {Hook::Evict, budget_.layers()}};
    if (collects_observed_attention()) claims.push_back({Hook::ObserveAttention, budget_.layers()});
    return claims;
  }
  // The eviction state of a step depends on all earlier steps: no call may start from a shared
  // prefix of another. A call may come in batches (each row steps on the state the rows before
  // it left), so a long prompt's scratch is bounded by the batch.
  size_t rewind_point(size_t) const override { return 0; }
  void truncate(size_t n_past) override;
  void prepare_keys(const QueryRows& q) override;
  void select_keys(const KeyQuery& q, std::span<const uint32_t> candidates,
                   std::vector<uint32_t>& keys) const override;
  void observe_attention(const AttentionRows& a) override;
  // Only a one-row batch reads the attention's probabilities (a longer one computes its own).
  bool wants_attention(size_t) const override { return collect_observed_; }
  void evict(const KvCache& cache, Evictions& out) override;

 protected:
  struct HeadState {
    std::vector<uint32_t> active;  // ascending
    std::vector<float> attention;  // per position: attention collected (method-specific window)
    std::vector<std::vector<uint32_t>> window_keys;  // SnapKV: the last rows' keys and probabilities
    std::vector<std::vector<float>> window_probs;
    size_t window_next = 0;
  };
  // Adds one step's attention (keys ascending, probabilities) to the head's importance state.
  virtual void collect(HeadState& s, std::span<const uint32_t> keys, std::span<const float> probs) const = 0;
  // Importance of active position j (higher: kept longer).
  virtual float importance(const HeadState& s, uint32_t j, size_t pos) const = 0;
  // How many of the newest tokens are never evicted, for a budget.
  virtual size_t protected_recent(size_t budget) const = 0;
  // Whether a decode step may collect the attention's own probabilities, which differ from
  // prepare_keys' in the last bits: false when importance ties hinge on those bits.
  virtual bool collects_observed_attention() const { return true; }

  const KeyBudget& budget() const { return budget_; }

 private:
  // One row's eviction and key list for eviction state `state` (a query head, or a KV head when
  // shared); with `collect_now`, also its query heads' attention over the list.
  void step(HeadState& s, const QueryRows& q, size_t row, size_t state, std::vector<uint32_t>& keys,
            bool collect_now);
  // The attention probabilities of query heads h0..h0+n_q (KV head kvh) of batch row `row` over
  // `keys`, summed over the heads into probs.
  static void attention_probs(const QueryRows& q, size_t row, size_t h0, size_t n_q, size_t kvh,
                              std::span<const uint32_t> keys, std::vector<float>& probs);
  // The probabilities of the heads a state collects: one head's as they are, a group's summed.
  std::span<const float> state_probs(const AttentionRows& a, size_t state);

  KeyBudget budget_;
  bool shared_ = false;
  size_t group_ = 1;
  size_t n_states_ = 0, heads_per_state_ = 1;     // eviction states per layer, query heads of each
  size_t n_seen_ = 0;                             // positions simulated so far
  size_t evict_checked_ = 0;                      // n_seen_ at evict's last walk over the active sets
  std::vector<uint8_t> active_somewhere_;         // evict: per position, whether some state holds it
  std::vector<HeadState> heads_;                  // [layer][state]
  std::vector<std::vector<uint32_t>> row_lists_;  // [row - the rows' first][state]
  size_t lists_pos0_ = 0;
  bool collect_observed_ = false;  // this layer's one-row batch collects in observe_attention
  std::vector<float> probs_;       // state_probs' sums
};

}  // namespace ts
