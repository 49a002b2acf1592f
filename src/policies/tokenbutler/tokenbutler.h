#pragma once
// TokenButler (paper 001) as a key-selecting policy: the predictor runs on the input of layer 0's
// attention (observe_layer_input), incrementally with its own caches (its attention's K/V and the
// importance keys of every position, per predicted (layer, head)); each query head of layers >= 1
// then attends to the budget(pos) keys with the largest predicted score q_imp·k_imp, the sinks, and
// an optional recent window, over the full KV cache. The importance keys are kept in F16, or in
// int8 with keys=i8 (they are read for every position at every step: a third of the KV cache's
// size per token in F32).
//
// shared=1 lets the query heads of a KV head share one selection, ranked by the sum of their
// predicted scores (one dot product of the group's concatenated importance queries and keys):
// the group then reads as many keys as one head's budget, instead of the union of its heads'
// lists (the paper selects per query head; shared=0, the default).
#include <memory>
#include <string>

#include "policies/key_budget.h"
#include "policies/tokenbutler/butler_net.h"
#include "runtime/policy.h"

namespace ts {

class TokenButlerKeys final : public Policy {
 public:
  explicit TokenButlerKeys(PolicyOptions& options);
  static PolicyOptionList options();  // declared once: parser, help, Python and README

  void bind(const Model& model) override;
  std::vector<HookClaim> claims() const override {
    return {{Hook::ObserveLayerInput, {0}}, {Hook::SelectKeys, budget_.layers()}};
  }
  void truncate(size_t n_past) override;
  void observe_layer_input(const LayerInput& in) override;
  void prepare_keys(const QueryRows& q) override;
  void select_keys(const KeyQuery& q, std::span<const uint32_t> candidates,
                   std::vector<uint32_t>& keys) const override;
  bool selects_per_group() const override { return shared_; }

 private:
  KeyBudget budget_;
  std::string path_;
  size_t recent_ = 0;
  bool shared_ = false;
  bool int8_keys_ = false;
  size_t group_ = 1, n_kv_heads_ = 1;  // the LLM's query heads per KV head, KV heads
  ButlerWeights weights_;
  std::unique_ptr<ButlerNet> net_;
  ButlerCache cache_;
  ButlerActs acts_;  // the current batch's importance queries
  size_t batch_pos0_ = 0;
  // One (layer, KV head)'s importance keys, of the group's query heads, in blocks of kF16Block
  // positions: F16 [block][group][d][kF16Block] (dot_f16_blocks' layout), or (keys=i8) int8
  // codes with one scale per position, [block][group * d / 2][kF16Block][2] (dot_i8_pairs'), half
  // the bytes scoring reads at every step and integer products.
  struct ImportanceKeys {
    std::vector<uint16_t> halves;
    std::vector<int8_t> codes;
    std::vector<float> scales;  // [position], whole blocks
  };
  std::vector<ImportanceKeys> keys_;
  // The scores of every position for a few lists (a decode step's), computed by prepare_keys in
  // chunks of positions across the pool: otherwise a step's lists would go one per thread (with
  // shared=1 on SmolLM2, 3 lists on 2 threads score for two lists' time). n_scored_ = 0 when the
  // lists are many (prefill): each select_keys then scores its own.
  struct ScoredList {
    size_t layer = 0, pos = 0, head = 0;
    std::vector<float> scores;  // [position]
  };
  std::vector<ScoredList> scored_;
  size_t n_scored_ = 0;
  std::vector<size_t> scored_chunk_end_;

  // The importance scores of positions [begin, end) (begin a multiple of kF16Block) for the query
  // of (layer, pos, head) and its n_heads - 1 next heads (their sum).
  void score(size_t layer, size_t pos, size_t head, size_t n_heads, size_t begin, size_t end,
             float* out) const;
};

}  // namespace ts
