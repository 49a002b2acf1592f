#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "kernels/simd_ops.h"

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

  if (params_.temperature <= 0.0f) return std::min_element(cands_.begin(), cands_.end(), before)->id;

  // A vocabulary is 50-150K tokens: sorting all of them, or exp() of each in double precision,
  // took longer per token than a batched decode step of a small model. The probabilities come
  // from the vectorized softmax, and only the candidates a cut looks at are sorted.
  size_t n = cands_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    n = static_cast<size_t>(params_.top_k);
    std::partial_sort(cands_.begin(), cands_.begin() + static_cast<std::ptrdiff_t>(n), cands_.end(), before);
  }
  if (params_.top_p < 1.0f || params_.min_p > 0.0f) n = cut(n);
  // The candidates left (every one in vocabulary order, or the largest first) at the temperature.
  probs_.resize(n);
  for (size_t i = 0; i < n; ++i) probs_[i] = cands_[i].logit / params_.temperature;
  ops().softmax(probs_.data(), n);
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += probs_[i];
  double r = uniform() * total;
  for (size_t i = 0; i < n; ++i) {
    r -= probs_[i];
    if (r < 0) return cands_[i].id;
  }
  return cands_[n - 1].id;
}

size_t Sampler::cut(size_t n) {
  // The cuts need probabilities at temperature 1 (as llama.cpp computes them) and walk the
  // candidates from the top: those within `span` of the largest logit are the top of the full
  // order, sorted; the span widens until a cut falls inside them.
  probs_.resize(n);
  for (size_t i = 0; i < n; ++i) probs_[i] = cands_[i].logit;
  ops().softmax(probs_.data(), n);
  for (size_t i = 0; i < n; ++i) cands_[i].p = probs_[i];
  const float top =
      std::min_element(cands_.begin(), cands_.begin() + static_cast<std::ptrdiff_t>(n), before)->logit;
  for (float span = 8.0f;;) {
    const auto end = cands_.begin() + static_cast<std::ptrdiff_t>(n);
    const auto near =
        std::partition(cands_.begin(), end, [&](const Candidate& c) { return c.logit >= top - span; });
    std::sort(cands_.begin(), near, before);
    const size_t sorted = static_cast<size_t>(near - cands_.begin());
    size_t keep = sorted;
    double acc = 0.0;
    for (size_t i = 0; i < sorted; ++i) {
      if (params_.min_p > 0.0f && i > 0 && cands_[i].p < params_.min_p * cands_[0].p) {
        keep = i;
        break;
      }
      acc += cands_[i].p;
      if (params_.top_p < 1.0f && acc >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
    if (keep < sorted || sorted == n) return keep;
    // No cut among the sorted ones: min-p may cut right after them, else take at least the next.
    const auto next = std::min_element(near, end, before);
    if (params_.min_p > 0.0f && next->p < params_.min_p * cands_[0].p) return sorted;
    span = std::max(2.0f * span, top - next->logit);
  }
}

}  // namespace ts
