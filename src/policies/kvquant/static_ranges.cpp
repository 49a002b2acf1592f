#include "policies/kvquant/static_ranges.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "policies/kvquant/sink_preservation.h"
#include "policies/profile_json.h"
#include "runtime/policy_stack.h"
#include "runtime/transformer.h"

namespace ts {
namespace {

constexpr RangeExclusion kRules[] = {RangeExclusion::None, RangeExclusion::Pfn, RangeExclusion::KvSink};

// Per layer and channel, the extremes of the K/V being written, one set per exclusion rule.
class RangeCollector final : public Policy {
 public:
  RangeCollector(const ModelConfig& c, const KvSink& sink, uint32_t emergence_layer, size_t preserved)
      : Policy({"kv_ranges", {}}), sink_(sink), emergence_layer_(emergence_layer), preserved_(preserved) {
    const size_t kv = size_t{c.n_kv_heads} * c.head_dim, n = c.n_layers * kv;
    for (RangeExclusion e : kRules) {
      CalibratedRanges& r = sets_.emplace_back();
      r.excluding = e;
      r.preserved = e == RangeExclusion::None ? 0 : preserved;
      r.ranges = {c.n_layers,
                  kv,
                  std::vector<float>(n, INFINITY),
                  std::vector<float>(n, -INFINITY),
                  std::vector<float>(n, INFINITY),
                  std::vector<float>(n, -INFINITY)};
    }
  }
  std::vector<HookClaim> claims() const override { return {{Hook::ObserveKv, {}}}; }
  void observe_kv(const KvRows& kv) override {
    for (CalibratedRanges& set : sets_) {
      KvStaticRanges& r = set.ranges;
      const size_t base = kv.layer * kv.kv_dim;
      for (size_t i = 0; i < kv.rows->size(); ++i) {
        const size_t pos = kv.pos0 + (*kv.rows)[i];
        if (excluded(set.excluding, kv.layer, pos)) continue;
        const float* k = kv.keys + i * kv.kv_dim;
        const float* v = kv.values + i * kv.kv_dim;
        for (size_t c = 0; c < kv.kv_dim; ++c) {
          r.key_lo[base + c] = std::min(r.key_lo[base + c], k[c]);
          r.key_hi[base + c] = std::max(r.key_hi[base + c], k[c]);
          r.value_lo[base + c] = std::min(r.value_lo[base + c], v[c]);
          r.value_hi[base + c] = std::max(r.value_hi[base + c], v[c]);
        }
      }
    }
  }
  std::vector<CalibratedRanges> sets_;

 private:
  bool excluded(RangeExclusion e, size_t layer, size_t pos) const {
    switch (e) {
      case RangeExclusion::None:
        return false;
      case RangeExclusion::Pfn:
        return pos < preserved_;
      case RangeExclusion::KvSink:
        return layer > emergence_layer_ && sink_.keeps(pos);
    }
    return false;
  }
  const KvSink& sink_;
  uint32_t emergence_layer_;
  size_t preserved_;
};

// Ranges are stored rounded outwards to 4 significant digits (a range widens by at most 0.1% of
// its end, far below an 8-bit step; every calibration value stays inside): short JSON.
double outward(float x, bool up) {
  if (!std::isfinite(x)) return x;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3e", double(x));
  double r = std::strtod(buf, nullptr);
  if (up ? r < x : r > x) {
    const double unit = std::pow(10.0, std::floor(std::log10(std::abs(r))) - 3);
    std::snprintf(buf, sizeof buf, "%.3e", up ? r + unit : r - unit);
    r = std::strtod(buf, nullptr);
  }
  return r;
}

}  // namespace

const char* exclusion_name(RangeExclusion e) {
  switch (e) {
    case RangeExclusion::None:
      return "none";
    case RangeExclusion::Pfn:
      return "pfn";
    case RangeExclusion::KvSink:
      return "kvsink";
  }
  return "?";
}

std::vector<CalibratedRanges> calibrate_kv_ranges(const Model& model, ThreadPool& pool,
                                                  std::span<const std::vector<int32_t>> windows,
                                                  uint32_t emergence_layer, uint32_t sink_channel,
                                                  size_t preserved) {
  TS_CHECK(!windows.empty(), "range calibration: no windows");
  size_t n_ctx = 0;
  for (const auto& w : windows) n_ctx = std::max(n_ctx, w.size());
  PolicyOptions opts(
      PolicySpec::parse(cat("kvsink:k=", preserved, ",layer=", emergence_layer, ",channel=", sink_channel)),
      KvSink::options());
  auto sink = std::make_unique<KvSink>(opts);
  auto collector = std::make_unique<RangeCollector>(model.config(), *sink, emergence_layer, preserved);
  RangeCollector* ranges = collector.get();
  std::vector<std::unique_ptr<Policy>> ps;
  ps.push_back(std::move(sink));  // picks the sinks at the emergence layer, before later layers write
  ps.push_back(std::move(collector));
  Transformer tf(model, pool, n_ctx);  // F16 cache: the ranges of the unquantized K/V
  tf.set_policies(std::make_unique<PolicyStack>(std::move(ps), model));
  for (const auto& w : windows) {
    TS_CHECK(w.size() >= 2, "range calibration: a window has fewer than 2 tokens");
    tf.truncate(0);
    tf.forward(w, false);
  }
  return ranges->sets_;
}

nlohmann::json ranges_to_json(const CalibratedRanges& r) {
  const KvStaticRanges& s = r.ranges;
  const auto rows = [&](const std::vector<float>& x, bool up) {
    nlohmann::json layers = nlohmann::json::array();
    for (size_t l = 0; l < s.n_layers; ++l) {
      std::vector<double> row(s.kv_dim);
      for (size_t c = 0; c < s.kv_dim; ++c) row[c] = outward(x[l * s.kv_dim + c], up);
      layers.push_back(row);
    }
    return layers;
  };
  return {{"excluding", exclusion_name(r.excluding)}, {"preserved", r.preserved},
          {"key_min", rows(s.key_lo, false)},         {"key_max", rows(s.key_hi, true)},
          {"value_min", rows(s.value_lo, false)},     {"value_max", rows(s.value_hi, true)}};
}

CalibratedRanges ranges_from_json(const nlohmann::json& j, const std::string& path) {
  CalibratedRanges r;
  try {
    const std::string e = j.at("excluding").get<std::string>();
    const auto rule = std::find_if(std::begin(kRules), std::end(kRules),
                                   [&](RangeExclusion x) { return e == exclusion_name(x); });
    TS_CHECK(rule != std::end(kRules), path, ": unknown range exclusion ", e);
    r.excluding = *rule;
    r.preserved = checked_number<uint64_t>(j.at("preserved"), path, "preserved");
    const auto rows = [&](const char* key, std::vector<float>& out) {
      TS_CHECK(j.at(key).is_array(), path, ": ", key, " must be an array of rows");
      std::vector<std::vector<float>> layers;
      for (const nlohmann::json& row : j.at(key)) layers.push_back(checked_numbers<float>(row, path, key));
      TS_CHECK(!layers.empty(), path, ": ", key, " is empty");
      if (r.ranges.n_layers == 0) r.ranges.n_layers = layers.size(), r.ranges.kv_dim = layers[0].size();
      TS_CHECK(layers.size() == r.ranges.n_layers, path, ": ", key, " has ", layers.size(), " layers");
      for (const auto& l : layers) {
        TS_CHECK(l.size() == r.ranges.kv_dim, path, ": ", key, " rows differ in length");
        out.insert(out.end(), l.begin(), l.end());
      }
    };
    rows("key_min", r.ranges.key_lo);
    rows("key_max", r.ranges.key_hi);
    rows("value_min", r.ranges.value_lo);
    rows("value_max", r.ranges.value_hi);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": bad ranges (" + e.what() + ")");
  }
  return r;
}

}  // namespace ts
