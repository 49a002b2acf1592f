#include "runtime/sequence.h"

#include <algorithm>

#include "core/error.h"

namespace ts {

Sequence::Sequence(const ModelConfig& config, size_t n_ctx)
    : n_layers_(config.n_layers),
      cache_(config.n_layers, n_ctx, size_t{config.n_kv_heads} * config.head_dim, config.head_dim) {}

void Sequence::truncate(size_t n) {
  n = std::min(n, cache_.size());
  if (policies_) policies_->truncate(n);  // first: a policy refusing n leaves the cache as it was
  cache_.set_size(n);
}

void Sequence::set_policies(std::unique_ptr<PolicyStack> policies) {
  TS_CHECK(n_past() == 0, "policies change only between sequences (", n_past(), " positions are cached)");
  policies_ = std::move(policies);
  if (policies_) policies_->set_log(log_);
  const KvFormat format = policies_ && policies_->kv_format() ? *policies_->kv_format() : KvFormat{};
  if (format.describe() != cache_.format().describe() || format.ranges != cache_.format().ranges)
    cache_ = KvCache(n_layers_, cache_.capacity(), cache_.kv_dim(), cache_.head_dim(), format);
  cache_.use_small_pages(policies_ && policies_->evicts());
}

void Sequence::set_decision_log(DecisionLog* log) {
  log_ = log;
  if (policies_) policies_->set_log(log);
}

void Sequence::end_batch() {
  if (policies_) policies_->end_batch(cache_);
}

}  // namespace ts
