#pragma once
// Several policies on one forward pass (kvpress's ComposedPress): binds them to the model, checks
// that no two own the same decision on a layer, dispatches every hook to its owner and observers
// in the order the policies were given, and records the decisions into an attached DecisionLog.
// The forward pass talks to policies only through this class.
#include <algorithm>
#include <memory>
#include <vector>

#include "runtime/decision_log.h"
#include "runtime/policy.h"

namespace ts {

// (token, layer) pairs of every batch since the stack was built, and how many of them ran each
// step: the sparsity the policies achieved, for reports (counted always, unlike the DecisionLog).
struct StepCounts {
  uint64_t token_layers = 0, attention = 0, ffn = 0, kv_cached = 0;
  double fraction(uint64_t ran) const {
    return token_layers ? static_cast<double>(ran) / static_cast<double>(token_layers) : 1.0;
  }
};

class PolicyStack {
 public:
  // Throws ts::Error when a policy rejects the model or two policies claim one decision on a layer.
  PolicyStack(std::vector<std::unique_ptr<Policy>> policies, const Model& model);

  const std::vector<std::unique_ptr<Policy>>& policies() const { return policies_; }
  bool ranks_whole_calls() const { return ranks_whole_calls_; }
  bool reads_normed_input() const { return reads_normed_input_; }
  // The longest prefix, at most n, that every policy can be truncated to (Policy::rewind_point).
  size_t rewind_point(size_t n) const;
  const StepCounts& counts() const { return counts_; }
  // The KV cache format a policy asks for (none: the default F16).
  const std::optional<KvFormat>& kv_format() const { return kv_format_; }
  // Records from the next batch on into `log` (nullptr: stop).
  void set_log(DecisionLog* log);

  // The forward pass's calls, in its order (policy.h lists the hooks).
  void begin_batch(size_t pos0, size_t n_tok);
  // Observers of the layer input, then the token selection: sets rows (every row when no policy selects).
  void plan_layer(const LayerInput& in, LayerRows& rows);
  bool skips_attention(size_t layer) const { return owner(Hook::SkipAttention, layer) != nullptr; }
  bool skips_by_queries(size_t layer) const {
    const Policy* p = owner(Hook::SkipAttention, layer);
    return p && p->skips_by_queries();
  }
  // Whether decide_kv has anything to do at this layer.
  bool decides_kv(size_t layer) const {
    return skips_attention(layer) || owner(Hook::KvStorage, layer) ||
           !observers(Hook::ObserveKv, layer).empty();
  }
  // Once rows.kv's K/V exist: attention skips (shrink rows.attn), storage of each kv row, K/V observers.
  void decide_kv(const LayerInput& in, const KvRows& kv, LayerRows& rows, std::vector<KvStorage>& storage);
  bool observes_queries(size_t layer) const { return !observers(Hook::ObserveQueries, layer).empty(); }
  void observe_queries(const QueryRows& queries) {
    for (Policy* o : observers(Hook::ObserveQueries, queries.layer)) o->observe_queries(queries);
  }
  const Policy* key_selector(size_t layer) const { return owner(Hook::SelectKeys, layer); }
  void prepare_keys(const QueryRows& queries) {
    owner(Hook::SelectKeys, queries.layer)->prepare_keys(queries);
  }
  bool observes_attention(size_t layer) const { return !observers(Hook::ObserveAttention, layer).empty(); }
  // Whether an observer reads this batch's attention probabilities at the layer (after prepare_keys).
  bool wants_attention(size_t layer) const {
    return std::ranges::any_of(observers(Hook::ObserveAttention, layer),
                               [&](const Policy* o) { return o->wants_attention(layer); });
  }
  void after_attention(const AttentionRows& attention);
  bool evicts() const { return !evictors_.empty(); }
  // After each batch: evictions.
  void end_batch(KvCache& cache);
  void truncate(size_t n_past);

 private:
  size_t slot(Hook h, size_t layer) const { return static_cast<size_t>(h) * n_layers_ + layer; }
  Policy* owner(Hook h, size_t layer) const { return owners_[slot(h, layer)]; }
  const std::vector<Policy*>& observers(Hook h, size_t layer) const { return observers_[slot(h, layer)]; }
  void claim(Policy* p, Hook h, size_t layer);
  // This batch's record of `layer`, created (all tokens dense) on first use; nullptr without a log.
  LayerRecord* record(size_t layer);

  std::vector<std::unique_ptr<Policy>> policies_;
  size_t n_layers_ = 0, n_heads_ = 0;
  std::vector<Policy*> owners_;                  // [hook][layer], decision hooks
  std::vector<std::vector<Policy*>> observers_;  // [hook][layer], observation hooks
  std::vector<Policy*> evictors_;                // policies owning evictions on some layer
  bool ranks_whole_calls_ = false;
  bool reads_normed_input_ = false;
  std::optional<KvFormat> kv_format_;

  DecisionLog* log_ = nullptr;
  StepCounts counts_;
  size_t pos0_ = 0, n_tok_ = 0;
  std::vector<int64_t> record_index_;  // per layer: this batch's entry in log_->layers, -1 if none
  TokenSelection selection_;           // scratch, reused across layers
  AttentionSkips skips_;
  std::vector<uint32_t> kept_rows_;
};

}  // namespace ts
