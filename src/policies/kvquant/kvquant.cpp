#include "policies/kvquant/kvquant.h"

#include <algorithm>

#include "core/error.h"
#include "model/model.h"
#include "policies/kvquant/outlier_profile.h"

namespace ts {

PolicyOptionList KvQuant::options() {
  return {integer_option("bits", 2, 8, "", "code width: 8, 4 or 2"),
          integer_option("group", 4, 1u << 16, "128", "values per quantization group (a multiple of 4)"),
          choice_option("mode", {"token", "kivi"}, "keys per token, or per channel as KIVI"),
          integer_option("residual", 0, 1u << 20, "0", "recent positions kept at full precision (KIVI)"),
          choice_option("prefill", {"full", "quantized"}, "the prompt's K/V at full precision or coded"),
          choice_option("ranges", {"dynamic", "static"}, "ranges per group, or calibrated (needs profile)"),
          path_option("profile", "ranges=static's calibration (tokensieve calibrate kvsink)"),
          choice_option("excluding", {"kvsink", "pfn", "none"}, "tokens the static ranges leave out")};
}

KvQuant::KvQuant(PolicyOptions& options) : Policy(options.spec()) {
  const std::optional<uint64_t> bits = options.integer("bits");
  TS_CHECK(bits && valid_code_bits(static_cast<unsigned>(*bits)), "policy ", options.spec().text(),
           ": bits must be 8, 4 or 2");
  format_.bits = static_cast<unsigned>(*bits);
  format_.group = *options.integer("group");
  TS_CHECK(format_.group % 4 == 0, "policy ", options.spec().text(), ": group must be a multiple of 4");
  format_.channel_keys = options.choice<bool>("mode", {false, true});
  format_.residual = *options.integer("residual");
  format_.quantized_prefill = options.choice<bool>("prefill", {false, true});
  const bool fixed = options.choice<bool>("ranges", {false, true});
  profile_ = options.path("profile").value_or("");
  excluding_ = options.choice<RangeExclusion>(
      "excluding", {RangeExclusion::KvSink, RangeExclusion::Pfn, RangeExclusion::None});
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
