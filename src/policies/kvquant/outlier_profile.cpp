#include "policies/kvquant/outlier_profile.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "policies/layer_profile.h"
#include "policies/profile_json.h"
#include "runtime/policy_stack.h"
#include "runtime/transformer.h"

namespace ts {
namespace {

constexpr const char* kFormat = "tokensieve-kvsink-profile";

// Per block output: per channel peak over every token seen, and |h| of the first text for the median.
class ResidualPeaks final : public Policy {
 public:
  ResidualPeaks(size_t n_layers, size_t dim)
      : Policy({"residual_peaks", {}}),
        peaks_(n_layers - 1, std::vector<ChannelPeak>(dim)),
        abs_(n_layers - 1) {
    for (auto& layer : peaks_)
      for (size_t c = 0; c < dim; ++c) layer[c].channel = static_cast<uint32_t>(c);
  }
  std::vector<HookClaim> claims() const override {
    std::vector<uint32_t> layers;
    for (uint32_t l = 1; l <= peaks_.size(); ++l) layers.push_back(l);
    return {{Hook::ObserveLayerInput, layers}};
  }
  void observe_layer_input(const LayerInput& in) override {
    std::vector<ChannelPeak>& peaks = peaks_[in.layer - 1];
    for (size_t t = 0; t < in.n_tok; ++t)
      for (size_t c = 0; c < in.dim; ++c) {
        const float a = std::abs(in.residual[t * in.dim + c]);
        if (a > peaks[c].max_abs)
          peaks[c] = {static_cast<uint32_t>(c), a, static_cast<uint32_t>(in.pos0 + t)};
        if (first_text_) abs_[in.layer - 1].push_back(a);
      }
  }
  void end_text() { first_text_ = false; }

  std::vector<std::vector<ChannelPeak>> peaks_;
  std::vector<std::vector<float>> abs_;
  bool first_text_ = true;
};

}  // namespace

std::vector<BlockOutliers> measure_outliers(const Model& model, ThreadPool& pool,
                                            std::span<const std::vector<int32_t>> texts, size_t top_n) {
  const ModelConfig& c = model.config();
  TS_CHECK(!texts.empty() && c.n_layers >= 2, "outliers: need a text and a model of 2+ layers");
  size_t n_ctx = 0;
  for (const auto& t : texts) n_ctx = std::max(n_ctx, t.size());
  Transformer tf(model, pool, n_ctx);
  auto owned = std::make_unique<ResidualPeaks>(c.n_layers, c.n_embd);
  ResidualPeaks* peaks = owned.get();
  std::vector<std::unique_ptr<Policy>> ps;
  ps.push_back(std::move(owned));
  tf.set_policies(std::make_unique<PolicyStack>(std::move(ps), model));
  for (const auto& t : texts) {
    tf.truncate(0);
    tf.forward(t, false);
    peaks->end_text();
  }
  std::vector<BlockOutliers> out;
  for (size_t l = 0; l + 1 < c.n_layers; ++l) {
    BlockOutliers b;
    b.layer = static_cast<uint32_t>(l);
    std::vector<float>& a = peaks->abs_[l];
    std::nth_element(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(a.size() / 2), a.end());
    b.median_abs = a[a.size() / 2];
    b.top = peaks->peaks_[l];
    std::sort(b.top.begin(), b.top.end(), [](const ChannelPeak& x, const ChannelPeak& y) {
      return x.max_abs != y.max_abs ? x.max_abs > y.max_abs : x.channel < y.channel;
    });
    b.top.resize(std::min(top_n, b.top.size()));
    out.push_back(std::move(b));
  }
  return out;
}

OutlierProfile choose_sink_channel(const Model& model, std::vector<BlockOutliers> layers) {
  TS_CHECK(!layers.empty() && !layers[0].top.empty(), "outliers: nothing measured");
  std::map<uint32_t, std::pair<size_t, float>> first;  // channel -> (blocks where it is top-1, peak)
  std::map<uint32_t, size_t> top3;
  for (const BlockOutliers& b : layers) {
    auto& f = first[b.top[0].channel];
    ++f.first;
    f.second = std::max(f.second, b.top[0].max_abs);
    for (size_t i = 0; i < std::min<size_t>(3, b.top.size()); ++i) ++top3[b.top[i].channel];
  }
  OutlierProfile p;
  p.model_name = model.config().name;
  p.model_hash = model_fingerprint(model);
  p.channel = std::max_element(first.begin(), first.end(), [](const auto& a, const auto& b) {
                return a.second < b.second;  // more blocks, then the larger peak
              })->first;
  const auto peak_of = [&](const BlockOutliers& b) {
    for (const ChannelPeak& cp : b.top)
      if (cp.channel == p.channel) return cp.max_abs;
    return 0.0f;
  };
  float peak = 0;
  for (const BlockOutliers& b : layers) peak = std::max(peak, peak_of(b));
  for (const BlockOutliers& b : layers)
    if (peak_of(b) >= 0.5f * peak) {
      p.emergence_layer = b.layer;
      break;
    }
  for (const auto& [ch, n] : top3)
    if (2 * n >= layers.size()) p.channels.push_back(ch);
  p.layers = std::move(layers);
  return p;
}

void write_outlier_profile(const std::string& path, const OutlierProfile& p) {
  nlohmann::json layers = nlohmann::json::array();
  for (const BlockOutliers& b : p.layers) {
    nlohmann::json top = nlohmann::json::array();
    for (const ChannelPeak& c : b.top)
      top.push_back({{"channel", c.channel}, {"max_abs", c.max_abs}, {"position", c.position}});
    layers.push_back({{"layer", b.layer}, {"median_abs", b.median_abs}, {"top", top}});
  }
  nlohmann::json j = {{"format", kFormat},
                      {"version", 1},
                      {"model", p.model_name},
                      {"model_hash", p.model_hash},
                      {"emergence_layer", p.emergence_layer},
                      {"channel", p.channel},
                      {"channels", p.channels},
                      {"layers", layers}};
  if (!p.calibration_json.empty()) j["calibration"] = nlohmann::json::parse(p.calibration_json);
  if (!p.ranges.empty()) {
    j["ranges"] = nlohmann::json::array();
    for (const CalibratedRanges& r : p.ranges) j["ranges"].push_back(ranges_to_json(r));
  }
  std::ofstream f(path);
  TS_CHECK(f, path, ": cannot write");
  f << j.dump() << "\n";
}

OutlierProfile read_outlier_profile(const std::string& path) {
  const nlohmann::json j = read_profile_json(path, kFormat);
  OutlierProfile p;
  try {
    p.model_name = j.value("model", "");
    p.model_hash = j.value("model_hash", "");
    p.emergence_layer = checked_number<uint32_t>(j.at("emergence_layer"), path, "emergence_layer");
    p.channel = checked_number<uint32_t>(j.at("channel"), path, "channel");
    if (j.contains("channels")) p.channels = checked_numbers<uint32_t>(j.at("channels"), path, "channels");
    if (j.contains("calibration")) p.calibration_json = j.at("calibration").dump();
    if (j.contains("ranges"))
      for (const nlohmann::json& r : j.at("ranges")) p.ranges.push_back(ranges_from_json(r, path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": bad field (" + e.what() + ")");
  }
  return p;
}

OutlierProfile read_outlier_profile(const std::string& path, const Model& model) {
  OutlierProfile p = read_outlier_profile(path);
  TS_CHECK(!p.model_hash.empty(), path, ": no model_hash (recalibrate: tokensieve calibrate kvsink)");
  const std::string hash = model_fingerprint(model);
  TS_CHECK(p.model_hash == hash, path, ": calibrated on another model (", p.model_name, ", ", p.model_hash,
           "); this one is ", model.config().name, ", ", hash);
  return p;
}

}  // namespace ts
