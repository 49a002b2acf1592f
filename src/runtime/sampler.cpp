#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace ts {

Sampler::Sampler(const SamplerParams& params) : params_(params), rng_(params.seed) {}

double Sampler::uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  const bool penalized = params_.repeat_penalty != 1.0f && params_.repeat_last_n > 0;
  if (params_.temperature <= 0.0f && !penalized)  // greedy: the first largest logit, no candidate list
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  cands_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) cands_[i] = {static_cast<int32_t>(i), logits[i]};

  if (penalized) {
    const size_t tail = std::min(history.size(), static_cast<size_t>(params_.repeat_last_n));
    const std::unordered_set<int32_t> recent(history.end() - static_cast<std::ptrdiff_t>(tail),
                                             history.end());
    for (int32_t id : recent) {
      if (id < 0 || static_cast<size_t>(id) >= cands_.size()) continue;
      float& l = cands_[static_cast<size_t>(id)].logit;
      l = l > 0 ? l / params_.repeat_penalty : l * params_.repeat_penalty;
    }
  }

  auto by_logit = [](const Candidate& a, const Candidate& b) {
    return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
  };
  if (params_.temperature <= 0.0f) return std::min_element(cands_.begin(), cands_.end(), by_logit)->id;

  size_t n = cands_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    n = static_cast<size_t>(params_.top_k);
    std::partial_sort(cands_.begin(), cands_.begin() + static_cast<std::ptrdiff_t>(n), cands_.end(),
                      by_logit);
  } else {
    std::sort(cands_.begin(), cands_.end(), by_logit);
  }
  // Probabilities at temperature 1 for the nucleus and min-p cuts, as llama.cpp computes them.
  std::vector<double> p(n);
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += p[i] = std::exp(double(cands_[i].logit) - double(cands_[0].logit));
  if (params_.top_p < 1.0f) {
    double acc = 0.0;
    for (size_t i = 0; i < n; ++i) {
      acc += p[i] / sum;
      if (acc >= params_.top_p) {
        n = i + 1;
        break;
      }
    }
  }
  if (params_.min_p > 0.0f) {
    size_t keep = 1;
    while (keep < n && p[keep] >= params_.min_p * p[0]) ++keep;
    n = keep;
  }
  double total = 0.0;
  for (size_t i = 0; i < n; ++i)
    total += p[i] = std::exp((double(cands_[i].logit) - double(cands_[0].logit)) / params_.temperature);
  double r = uniform() * total;
  for (size_t i = 0; i < n; ++i) {
    r -= p[i];
    if (r < 0) return cands_[i].id;
  }
  return cands_[n - 1].id;
}

}  // namespace ts
