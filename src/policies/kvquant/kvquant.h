#pragma once
// KV cache quantization (KIVI, Liu et al. 2024; the RTN schemes of KVSink, Su & Yuan 2025).
//
// The run's KV cache stores low-bit codes (runtime/kv_cache.h): values per token in groups of
// `group` channels; keys the same (mode=token) or per channel over blocks of `group` tokens
// (mode=kivi, whose unfinished block stays in half precision). The `residual` most recent tokens
// are also read in half precision. prefill=quantized makes a batch attend to its own K/V quantized
// (the papers' fake-quant perplexity protocol); prefill=full lets it read them at full precision as
// they were just computed. Ranges are dynamic (min/max of each group), or static: calibrated per
// layer and channel (`tokensieve calibrate kvsink` writes them into the kvsink profile), from the
// range set that left out the tokens `excluding` keeps at full precision (static_ranges.h). Combine
// with pfn or kvsink to keep chosen tokens at full precision.
#include "policies/kvquant/static_ranges.h"
#include "runtime/policy.h"

namespace ts {

class KvQuant final : public Policy {
 public:
  explicit KvQuant(PolicyOptions& options);
  static PolicyOptionList options();  // declared once: parser, help, Python and README
  void bind(const Model& model) override;
  std::vector<HookClaim> claims() const override { return {}; }
  std::optional<KvFormat> kv_format() const override { return format_; }

 private:
  KvFormat format_;
  std::string profile_;  // static ranges from this kvsink profile
  RangeExclusion excluding_ = RangeExclusion::KvSink;
};

}  // namespace ts
