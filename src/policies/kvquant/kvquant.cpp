#include "policies/kvquant/kvquant.h"

#include <algorithm>

#include "core/error.h"
#include "model/model.h"
#include "policies/kvquant/outlier_profile.h"

namespace ts {

KvQuant::KvQuant(PolicyOptions& options) : Policy(options.spec()) {
  const std::optional<uint64_t> bits = options.take_uint("bits", 2, 8);
  TS_CHECK(bits && valid_code_bits(static_cast<unsigned>(*bits)), "policy ", options.spec().text(),
           ": bits must be 8, 4 or 2");
  format_.bits = static_cast<unsigned>(*bits);
  format_.group = options.take_uint("group", 4, 1u << 16).value_or(128);
  TS_CHECK(format_.group % 4 == 0, "policy ", options.spec().text(), ": group must be a multiple of 4");
  format_.channel_keys = options.take_choice<bool>("mode", {{"token", false}, {"kivi", true}});
  format_.residual = options.take_uint("residual", 0, 1u << 20).value_or(0);
  format_.quantized_prefill = options.take_choice<bool>("prefill", {{"full", false}, {"quantized", true}});
  const bool fixed = options.take_choice<bool>("ranges", {{"dynamic", false}, {"static", true}});
  profile_ = options.take_path("profile").value_or("");
  excluding_ = options.take_choice<RangeExclusion>(
      "excluding",
      {{"kvsink", RangeExclusion::KvSink}, {"pfn", RangeExclusion::Pfn}, {"none", RangeExclusion::None}});
  TS_CHECK(
      fixed == !profile_.empty(), "policy ", options.spec().text(),
      ": ranges=static needs profile=FILE (tokensieve calibrate kvsink), and profile= needs ranges=static");
}

void KvQuant::bind(const Model& model) {
  if (profile_.empty()) return;
  OutlierProfile p = read_outlier_profile(profile_, model);
  const auto set = std::find_if(p.ranges.begin(), p.ranges.end(),
                                [&](const CalibratedRanges& r) { return r.excluding == excluding_; });
  TS_CHECK(set != p.ranges.end(), profile_, ": no static ranges excluding ", exclusion_name(excluding_),
           " (write them with tokensieve calibrate kvsink)");
  const ModelConfig& c = model.config();
  TS_CHECK(set->ranges.n_layers == c.n_layers && set->ranges.kv_dim == size_t{c.n_kv_heads} * c.head_dim,
           profile_, ": ranges of ", set->ranges.n_layers, " layers x ", set->ranges.kv_dim,
           " channels do not fit this model");
  format_.ranges = std::make_shared<const KvStaticRanges>(std::move(set->ranges));
}

}  // namespace ts
