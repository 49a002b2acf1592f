#pragma once
// Full-precision KV for attention-sink tokens under a quantized cache (combine with kvquant).
//
// Preserve-First-N (pfn) keeps the K/V of positions 0..n-1 at full precision in every layer.
//
// KVSink (Su & Yuan 2025, Algorithm 1): in each multi-token call (prefill) the k tokens with the
// largest |h[:, C]| at the output of block L (the emergence layer of the model's stable outlier
// channel C, found by `tokensieve calibrate kvsink -o PROFILE`) keep full-precision K/V in every layer after
// L; layers up to L quantize them (the paper's literal order). Single-token calls (decode) never
// add sinks. A call of several batches keeps a running top-k: a token chosen in a later batch
// cannot free the slot of one already kept, so a long prefill may keep a few more than k.
#include <utility>
#include <vector>

#include "runtime/policy.h"

namespace ts {

class PreserveFirstN final : public Policy {
 public:
  explicit PreserveFirstN(PolicyOptions& options);
  static PolicyOptionList options();  // declared once: parser, help, Python and README
  std::vector<HookClaim> claims() const override { return {{Hook::KvStorage, {}}}; }
  void choose_kv_storage(const LayerInput& in, const KvRows& kv, std::span<KvStorage> storage) override;

 private:
  size_t n_ = 0;
};

class KvSink final : public Policy {
 public:
  explicit KvSink(PolicyOptions& options);
  static PolicyOptionList options();  // declared once: parser, help, Python and README
  void bind(const Model& model) override;
  std::vector<HookClaim> claims() const override;
  // The k sinks are the top k of the whole prompt: cut into batches, a token pinned in one batch
  // (its K/V already stored in full precision) could not be released when a later batch outranks
  // it, and a 2048-token prompt ended with up to 8 pinned tokens for k = 5.
  bool ranks_whole_calls() const override { return true; }
  void truncate(size_t n_past) override;
  void observe_layer_input(const LayerInput& in) override;
  void choose_kv_storage(const LayerInput& in, const KvRows& kv, std::span<KvStorage> storage) override;
  // The positions kept so far in this sequence, ascending.
  std::vector<uint32_t> sinks() const;
  bool keeps(size_t pos) const { return pos < kept_.size() && kept_[pos]; }

 private:
  size_t k_ = 5;
  std::string profile_;
  uint32_t layer_ = 0, channel_ = 0, n_layers_ = 0;
  std::vector<std::pair<float, uint32_t>> top_;  // (|h[pos, channel]|, pos), largest first, at most k
  std::vector<uint8_t> kept_;                    // per position: full precision
};

}  // namespace ts
