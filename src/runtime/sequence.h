#pragma once
// What belongs to one sequence of the forward pass: its KV cache, its policies and where their
// decisions go. ForwardPass holds what sequences share (weights, threads, activations) and runs
// several of them in one batch; each sequence's attention and policies see that sequence alone.
#include <cstddef>
#include <memory>

#include "model/model.h"
#include "runtime/kv_cache.h"
#include "runtime/policy_stack.h"

namespace ts {

class Sequence {
 public:
  // n_ctx: maximum positions held by the KV cache.
  Sequence(const ModelConfig& config, size_t n_ctx);

  size_t n_past() const { return cache_.size(); }
  size_t n_ctx() const { return cache_.capacity(); }
  // Forgets cached positions >= n: to start a new window (0), or to reuse a shared prefix of n
  // positions, where n must be a rewind_point answer (a policy may refuse another with ts::Error).
  void truncate(size_t n);
  // Policies for the following calls (nullptr: dense); only between sequences (n_past() == 0).
  void set_policies(std::unique_ptr<PolicyStack> policies);
  const PolicyStack* policies() const { return policies_.get(); }
  PolicyStack* policies() { return policies_.get(); }
  bool ranks_whole_calls() const { return policies_ && policies_->ranks_whole_calls(); }
  // The longest prefix, at most n positions, that truncate can keep with the policies' state exact.
  size_t rewind_point(size_t n) const { return policies_ ? policies_->rewind_point(n) : n; }
  // Records the policies' decisions into `log` until set_decision_log(nullptr).
  void set_decision_log(DecisionLog* log);
  // After each batch (a decode step, a chunk of a prompt; a call that a policy ranks whole is one
  // batch): the policies' evictions, of positions no later row reads.
  void end_batch();

  const KvCache& cache() const { return cache_; }
  KvCache& cache() { return cache_; }

 private:
  size_t n_layers_;
  KvCache cache_;
  std::unique_ptr<PolicyStack> policies_;
  DecisionLog* log_ = nullptr;
};

}  // namespace ts
