#include "policies/key_budget.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

#include "core/error.h"
#include "model/model.h"

namespace ts {

PolicyOptionList KeyBudget::options() {
  return {number_option("keep", 0, 1, "", "the fraction of keys each query attends to"),
          integer_option("sinks", 0, 1u << 20, "4", "first positions always kept"),
          integer_option("first_layer", 0, 1u << 16, "1", "layers before it attend densely")};
}

KeyBudget::KeyBudget(PolicyOptions& options, double keep_default) {
  const std::optional<double> keep = options.number("keep");
  TS_CHECK(keep || keep_default >= 0, "policy ", options.spec().name,
           ": give keep=F, the fraction of keys kept");
  keep_given_ = keep.has_value();
  keep_ = keep ? *keep : keep_default;
  TS_CHECK(keep_ > 0, "policy ", options.spec().name, ": keep must be above 0");
  sinks_ = *options.integer("sinks");
  first_layer_ = static_cast<uint32_t>(*options.integer("first_layer"));
}

void KeyBudget::bind(const Model& model, const std::string& policy) {
  const uint32_t n_layers = model.config().n_layers;
  TS_CHECK(first_layer_ < n_layers, "policy ", policy, ": first_layer=", first_layer_, " but the model has ",
           n_layers, " layers");
  layers_.clear();
  for (uint32_t l = first_layer_; l < n_layers; ++l) layers_.push_back(l);
}

namespace {

// Order-preserving integer image of a score: a > b as floats iff key(a) > key(b); -0 and +0 map
// to the same key, as they compare equal.
uint32_t order_key(float s) {
  const uint32_t u = std::bit_cast<uint32_t>(s == 0.0f ? 0.0f : s);
  return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

// The k-th largest of keys[0..n) (1 <= k <= n), one byte at a time from the top (radix select:
// linear, unlike sorting, and cheaper than nth_element on floats). Returns it with `k` reduced
// to how many of the keys equal to it are among the k largest. keys is overwritten.
uint32_t kth_largest(uint32_t* keys, size_t n, size_t& k) {
  uint32_t value = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    std::array<size_t, 256> count{};
    for (size_t j = 0; j < n; ++j) ++count[(keys[j] >> shift) & 0xFFu];
    uint32_t digit = 255;
    for (; count[digit] < k; --digit) k -= count[digit];
    value |= digit << shift;
    size_t kept = 0;  // the keys with this digit go on to the next byte (branch-free: it is a coin toss)
    for (size_t j = 0; j < n; ++j) {
      keys[kept] = keys[j];
      kept += ((keys[j] >> shift) & 0xFFu) == digit;
    }
    n = kept;
  }
  return value;
}

}  // namespace

void select_top_keys(std::span<const uint32_t> candidates, std::span<const float> scores, size_t k,
                     size_t sinks, std::vector<uint32_t>& keys) {
  keys.clear();
  if (k >= candidates.size()) {
    keys.assign(candidates.begin(), candidates.end());
    return;
  }
  // The k-th largest score is the threshold: above it everything is kept, at it the earliest.
  thread_local std::vector<uint32_t> work;
  work.resize(scores.size());
  for (size_t j = 0; j < scores.size(); ++j) work[j] = order_key(scores[j]);
  size_t at_threshold = k;  // k == 0: no score is above the threshold or ties it
  const uint32_t threshold = k > 0 ? kth_largest(work.data(), work.size(), at_threshold) : UINT32_MAX;
  // Branch-free: whether a key is taken is unpredictable (about keep of them are).
  keys.resize(k + std::min(sinks, candidates.size()) + 1);  // + 1: the write past the last one taken
  size_t n = 0;
  for (size_t j = 0; j < candidates.size(); ++j) {
    const uint32_t s = order_key(scores[j]);
    const bool tie = s == threshold && at_threshold > 0;
    at_threshold -= tie;
    keys[n] = candidates[j];
    n += s > threshold || tie || candidates[j] < sinks;
  }
  keys.resize(n);
}

}  // namespace ts
