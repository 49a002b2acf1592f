#include "policies/snapkv/snapkv.h"

#include <algorithm>

namespace ts {

PolicyOptionList SnapKVKeys::options() {
  return EvictingKeys::options() +
         PolicyOptionList{integer_option("window", 1, 1u << 16, "32", "the observation window's queries"),
                          integer_option("pool", 1, 255, "7", "max-pooling width over positions")};
}

SnapKVKeys::SnapKVKeys(PolicyOptions& options)
    : EvictingKeys(options), window_(*options.integer("window")), pool_(*options.integer("pool")) {}

// The window's sum: this query's probabilities in, those of the query leaving the window out.
void SnapKVKeys::collect(HeadState& s, std::span<const uint32_t> keys, std::span<const float> probs) const {
  size_t slot = s.window_keys.size();
  if (slot < window_) {
    s.window_keys.emplace_back();
    s.window_probs.emplace_back();
  } else {
    slot = s.window_next;
    const std::vector<uint32_t>& old_keys = s.window_keys[slot];
    const std::vector<float>& old_probs = s.window_probs[slot];
    for (size_t j = 0; j < old_keys.size(); ++j) s.attention[old_keys[j]] -= old_probs[j];
  }
  s.window_keys[slot].assign(keys.begin(), keys.end());
  s.window_probs[slot].assign(probs.begin(), probs.end());
  s.window_next = (slot + 1) % window_;
  for (size_t j = 0; j < keys.size(); ++j) s.attention[keys[j]] += probs[j];
}

float SnapKVKeys::importance(const HeadState& s, uint32_t j, size_t pos) const {
  const size_t half = pool_ / 2, lo = j >= half ? j - half : 0, hi = std::min(pos, size_t{j} + half);
  return *std::max_element(s.attention.begin() + static_cast<std::ptrdiff_t>(lo),
                           s.attention.begin() + static_cast<std::ptrdiff_t>(hi) + 1);
}

}  // namespace ts
