#include "runtime/kv_cache.h"

#include <algorithm>
#include <iterator>
#include <numeric>

namespace ts {

KvCache::KvCache(size_t n_layers, size_t n_ctx, size_t kv_dim)
    : n_layers_(n_layers),
      n_ctx_(n_ctx),
      kv_dim_(kv_dim),
      keys_(n_layers * n_ctx * kv_dim),
      values_(n_layers * n_ctx * kv_dim),
      all_positions_(n_ctx),
      partial_(n_layers, 0),
      held_(n_layers) {
  std::iota(all_positions_.begin(), all_positions_.end(), 0u);
}

void KvCache::set_size(size_t n) {
  n_used_ = n;
  for (size_t l = 0; l < n_layers_; ++l) {
    if (!partial_[l]) continue;
    std::vector<uint32_t>& h = held_[l];
    h.erase(std::lower_bound(h.begin(), h.end(), n), h.end());
    if (h.size() == n) {  // ascending, unique and below n: every position is back
      partial_[l] = 0;
      h.clear();
    }
  }
}

std::span<const uint32_t> KvCache::held(size_t layer, size_t pos) const {
  if (!partial_[layer]) return std::span(all_positions_).first(std::min(pos + 1, n_ctx_));
  const std::vector<uint32_t>& h = held_[layer];
  return std::span(h.data(), static_cast<size_t>(std::upper_bound(h.begin(), h.end(), pos) - h.begin()));
}

void KvCache::list_held(size_t layer, size_t up_to) {
  partial_[layer] = 1;
  held_[layer].assign(all_positions_.begin(), all_positions_.begin() + static_cast<std::ptrdiff_t>(up_to));
}

void KvCache::hold_only(size_t layer, size_t pos0, std::span<const uint32_t> stored) {
  if (!partial_[layer]) list_held(layer, pos0);
  std::vector<uint32_t>& h = held_[layer];
  h.erase(std::lower_bound(h.begin(), h.end(), pos0), h.end());
  h.insert(h.end(), stored.begin(), stored.end());
}

void KvCache::hold_all(size_t layer, size_t pos0, size_t n_tok) {
  if (!partial_[layer]) return;
  std::vector<uint32_t>& h = held_[layer];
  h.erase(std::lower_bound(h.begin(), h.end(), pos0), h.end());
  for (size_t p = pos0; p < pos0 + n_tok; ++p) h.push_back(static_cast<uint32_t>(p));
}

void KvCache::evict(size_t layer, std::span<const uint32_t> positions) {
  if (positions.empty()) return;
  if (!partial_[layer]) list_held(layer, n_used_);
  std::vector<uint32_t> gone(positions.begin(), positions.end());
  std::sort(gone.begin(), gone.end());
  std::vector<uint32_t>& h = held_[layer];
  std::vector<uint32_t> kept;
  kept.reserve(h.size());
  std::set_difference(h.begin(), h.end(), gone.begin(), gone.end(), std::back_inserter(kept));
  h.swap(kept);
}

}  // namespace ts
