#include "policies/key_budget.h"

#include <algorithm>
#include <functional>

#include "core/error.h"
#include "model/model.h"

namespace ts {

KeyBudget::KeyBudget(PolicyOptions& options, double keep_default) {
  const std::optional<double> keep = options.take_double("keep", 0, 1);
  TS_CHECK(keep || keep_default >= 0, "policy ", options.spec().name,
           ": give keep=F, the fraction of keys kept");
  keep_given_ = keep.has_value();
  keep_ = keep ? *keep : keep_default;
  TS_CHECK(keep_ > 0, "policy ", options.spec().name, ": keep must be above 0");
  sinks_ = options.take_uint("sinks", 0, 1u << 20).value_or(4);
  first_layer_ = static_cast<uint32_t>(options.take_uint("first_layer", 0, 1u << 16).value_or(1));
}

void KeyBudget::bind(const Model& model, const std::string& policy) {
  const uint32_t n_layers = model.config().n_layers;
  TS_CHECK(first_layer_ < n_layers, "policy ", policy, ": first_layer=", first_layer_, " but the model has ",
           n_layers, " layers");
  layers_.clear();
  for (uint32_t l = first_layer_; l < n_layers; ++l) layers_.push_back(l);
}

void select_top_keys(std::span<const uint32_t> candidates, std::span<const float> scores, size_t k,
                     size_t sinks, std::vector<uint32_t>& keys) {
  keys.clear();
  if (k >= candidates.size()) {
    keys.assign(candidates.begin(), candidates.end());
    return;
  }
  // The k-th largest score is the threshold: above it everything is kept, at it the earliest.
  thread_local std::vector<float> work;
  work.assign(scores.begin(), scores.end());
  float threshold = -INFINITY;
  size_t at_threshold = 0;
  if (k > 0) {
    std::nth_element(work.begin(), work.begin() + static_cast<std::ptrdiff_t>(k - 1), work.end(),
                     std::greater<float>());
    threshold = work[k - 1];
    at_threshold =
        k - static_cast<size_t>(std::count_if(work.begin(), work.begin() + static_cast<std::ptrdiff_t>(k),
                                              [&](float s) { return s > threshold; }));
  }
  for (size_t j = 0; j < candidates.size(); ++j) {
    const float s = scores[j];
    bool take = k > 0 && s > threshold;
    if (!take && k > 0 && s == threshold && at_threshold > 0) {
      take = true;
      --at_threshold;
    }
    if (take || candidates[j] < sinks) keys.push_back(candidates[j]);
  }
}

}  // namespace ts
